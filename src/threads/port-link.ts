// A link interface carried over a MessagePort, written once for every interface whose methods are
// calls with no answer (`void`): `linkOverPort` gives the sending side an object implementing the
// interface that posts one message per call; `serveLink` hands each call it receives to the
// implementation it names. Several implementations share one port (one per service), and so do
// other messages: a call is `{ t: 'call', m, s, a }`, method `m` of implementation `s` with the
// arguments `a`, and anything else on the port is left to its other listeners
// (docs/architecture.md#the-worker-protocol).
//
// A call costs its message and its argument array, nothing else: the sending methods are made once
// per link, and the receiver applies the posted array as it arrives.

/** An interface every member of which is a method with no answer (a `void` result: not a value, not a promise). */
export type Calls<I> = { readonly [K in keyof I]: I[K] extends (...args: infer A) => infer R ? ([R] extends [void] ? (...args: A) => void : never) : never };

/** Link interface `I`'s method names, each listed once (a missing or extra name does not compile). */
export interface LinkMethods<I extends Calls<I>> {
  readonly names: ReadonlySet<string>;
  /** Never set: it carries `I` to `linkOverPort` and `serveLink`. */
  readonly of?: I;
}

export function linkMethods<I extends Calls<I>>(names: { readonly [K in keyof I]-?: true }): LinkMethods<I> {
  return { names: new Set(Object.keys(names)) };
}

/** One call as it crosses the port. */
export interface LinkCall {
  t: 'call';
  /** The method's name. */
  m: string;
  /** Which of the receiver's implementations serves it (a service's index in the config). */
  s: number;
  /** The arguments, as the caller passed them. */
  a: unknown[];
}

/** What a call is posted to: a `MessagePort`, `parentPort`, or a `Worker`. */
export interface LinkPort {
  postMessage(value: unknown): void;
}

/** What calls are received from. */
export interface LinkSource {
  on(event: 'message', listener: (value: unknown) => void): unknown;
}

export type LinkErrorCode = 'ERR_SLUICE_LINK_UNKNOWN_METHOD' | 'ERR_SLUICE_LINK_UNKNOWN_TARGET';

/** A call the receiver cannot serve: a method the link does not have, or no implementation `s`. */
export class LinkError extends Error {
  constructor(
    readonly code: LinkErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'LinkError';
  }
}

/** Link `I` to implementation `s` at the other end of `port`: each call posts one message. */
export function linkOverPort<I extends Calls<I>>(port: LinkPort, methods: LinkMethods<I>, s: number): I {
  const link: Record<string, (...a: unknown[]) => void> = {};
  for (const m of methods.names) {
    link[m] = (...a: unknown[]): void => port.postMessage({ t: 'call', m, s, a } satisfies LinkCall);
  }
  return link as unknown as I;
}

/**
 * Serves the calls of link `I` arriving on `port`: call `{ m, s, a }` runs `impls[s][m](...a)`,
 * in the order the calls were posted. `impls` is read at each call (it may grow after this).
 * A call naming a method `I` does not have, or an `s` with no implementation, runs nothing and
 * goes to `refused` with its code; whatever an implementation throws is its own.
 */
export function serveLink<I extends Calls<I>>(port: LinkSource, methods: LinkMethods<I>, impls: readonly I[], refused: (error: LinkError) => void): void {
  const names = methods.names;
  port.on('message', (message) => {
    if ((message as Partial<LinkCall> | null)?.t !== 'call') return;
    const { m, s, a } = message as LinkCall;
    if (!names.has(m)) {
      refused(new LinkError('ERR_SLUICE_LINK_UNKNOWN_METHOD', `link call ${JSON.stringify(m)} names no method of the link`));
      return;
    }
    const impl = (typeof s === 'number' ? impls[s] : undefined) as Record<string, (...args: unknown[]) => void> | undefined;
    if (impl === undefined) {
      refused(new LinkError('ERR_SLUICE_LINK_UNKNOWN_TARGET', `link call ${JSON.stringify(m)} names implementation ${String(s)}, which does not exist`));
      return;
    }
    Reflect.apply(impl[m]!, impl, a);
  });
}
