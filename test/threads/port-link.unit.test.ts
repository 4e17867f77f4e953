// The generic link over a MessagePort on its own (src/threads/port-link.ts): a real MessageChannel,
// no gateway. Calls arrive in order at the implementation they name, other messages on the same
// port pass by, and a call naming no method of the link or no implementation runs nothing and is
// refused with its code. The type checks at the end fail the build if the types loosen.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { test } from 'node:test';
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import { type LinkError, type LinkMethods, linkMethods, linkOverPort, serveLink } from '../../src/threads/port-link.js';

interface Pair {
  note(n: number, text: string): void;
  info(r: { slot: number; origin: string }, extra: number[]): void;
  none(): void;
}
const PAIR = linkMethods<Pair>({ note: true, info: true, none: true });

/** An implementation that records its calls, with a method of its own the link must not reach. */
class Recorder implements Pair {
  constructor(
    private readonly name: string,
    private readonly log: unknown[][],
  ) {}
  note(n: number, text: string): void {
    this.log.push([this.name, 'note', n, text]);
  }
  info(r: { slot: number; origin: string }, extra: number[]): void {
    this.log.push([this.name, 'info', r, extra]);
  }
  none(...args: unknown[]): void {
    this.log.push([this.name, 'none', args.length]);
  }
  close(): void {
    this.log.push([this.name, 'close']);
  }
}

/** Resolves once `log` holds `n` entries, checked at each message the port delivers. */
async function entries(port: MessagePort, log: unknown[], n: number): Promise<void> {
  while (log.length < n) await once(port, 'message');
}

function channel(t: { after(fn: () => void): void }): { sender: MessagePort; receiver: MessagePort } {
  const { port1, port2 } = new MessageChannel();
  t.after(() => {
    port1.close();
    port2.close();
  });
  return { sender: port1, receiver: port2 };
}

test('port link: each call reaches the implementation it names, in order, with its arguments', async (t) => {
  const { sender, receiver } = channel(t);
  const log: unknown[][] = [];
  const refused: LinkError[] = [];
  serveLink(receiver, PAIR, [new Recorder('zero', log), new Recorder('one', log)], (err) => refused.push(err));
  const zero: Pair = linkOverPort(sender, PAIR, 0);
  const one: Pair = linkOverPort(sender, PAIR, 1);
  assert.deepEqual(Object.keys(one).sort(), ['info', 'none', 'note'], 'the link has the methods of the interface, and only those');

  one.note(7, 'first');
  zero.info({ slot: 3, origin: 'http://127.0.0.1:9000' }, [1, 2]);
  one.none();
  zero.note(-1, '');
  await entries(receiver, log, 4);

  assert.deepEqual(log, [
    ['one', 'note', 7, 'first'],
    ['zero', 'info', { slot: 3, origin: 'http://127.0.0.1:9000' }, [1, 2]],
    ['one', 'none', 0],
    ['zero', 'note', -1, ''],
  ]);
  assert.deepEqual(refused, []);
});

test('port link: other messages on the port pass by, and keep their place among the calls', async (t) => {
  const { sender, receiver } = channel(t);
  const log: unknown[][] = [];
  const refused: LinkError[] = [];
  serveLink(receiver, PAIR, [new Recorder('zero', log)], (err) => refused.push(err));
  receiver.on('message', (message: { t?: string }) => {
    if (message?.t !== 'call') log.push(['other', message]);
  });
  const zero = linkOverPort(sender, PAIR, 0);

  zero.note(1, 'a');
  sender.postMessage({ t: 'log', text: 'a line' });
  sender.postMessage('done');
  sender.postMessage(null);
  zero.note(2, 'b');
  await entries(receiver, log, 5);

  assert.deepEqual(log, [['zero', 'note', 1, 'a'], ['other', { t: 'log', text: 'a line' }], ['other', 'done'], ['other', null], ['zero', 'note', 2, 'b']]);
  assert.deepEqual(refused, [], 'a message that is not a call is not refused: it is not the link’s');
});

test('port link: a call naming no method of the link, or no implementation, runs nothing and is refused with its code', async (t) => {
  const { sender, receiver } = channel(t);
  const log: unknown[][] = [];
  const refused: LinkError[] = [];
  serveLink(receiver, PAIR, [new Recorder('zero', log)], (err) => refused.push(err));
  const zero = linkOverPort(sender, PAIR, 0);

  // The receiver's own method, a method of every object, and a name nobody has.
  for (const m of ['close', 'constructor', 'toString', '__proto__', 'nope']) sender.postMessage({ t: 'call', m, s: 0, a: [] });
  // A method of the link, for an implementation that does not exist (past the end, negative, not a number).
  for (const s of [1, -1, 0.5, '0', 'length', '__proto__']) sender.postMessage({ t: 'call', m: 'note', s, a: [9, 'x'] });
  zero.note(3, 'after'); // the link still serves what follows
  await entries(receiver, log, 1);

  assert.deepEqual(log, [['zero', 'note', 3, 'after']], 'no refused call ran anything');
  assert.deepEqual(
    refused.map((err) => err.code),
    [...Array<string>(5).fill('ERR_SLUICE_LINK_UNKNOWN_METHOD'), ...Array<string>(6).fill('ERR_SLUICE_LINK_UNKNOWN_TARGET')],
  );
  assert.match(refused[0]!.message, /"close" names no method of the link/);
  assert.match(refused[5]!.message, /"note" names implementation 1, which does not exist/);
  assert.ok(refused.every((err) => err instanceof Error && err.name === 'LinkError'));
});

test('port link: implementations added after serveLink are served (the array is read at each call)', async (t) => {
  const { sender, receiver } = channel(t);
  const log: unknown[][] = [];
  const impls: Pair[] = [];
  serveLink(receiver, PAIR, impls, (err) => log.push(['refused', err.code]));
  impls.push(new Recorder('late', log));
  linkOverPort(sender, PAIR, 0).note(1, 'late');
  await entries(receiver, log, 1);
  assert.deepEqual(log, [['late', 'note', 1, 'late']]);
});

// ── types (checked by the build; nothing here runs) ──────────────────────────────────────────

interface Answers {
  count(): number;
}
interface Waits {
  later(): Promise<void>;
}

function typeChecks(port: MessagePort): void {
  // @ts-expect-error a method of the interface is missing
  linkMethods<Pair>({ note: true, info: true });
  // @ts-expect-error a name the interface does not have
  linkMethods<Pair>({ note: true, info: true, none: true, close: true });
  // @ts-expect-error a method with an answer cannot cross as a call
  linkMethods<Answers>({ count: true });
  // @ts-expect-error nor can one whose answer is a promise
  linkMethods<Waits>({ later: true });
  const pair = linkOverPort(port, PAIR, 0);
  // @ts-expect-error the link has the interface's methods with their parameter types
  pair.note('7', 'text');
  // @ts-expect-error and no others
  pair.close();
  const methods: LinkMethods<Pair> = PAIR;
  // @ts-expect-error implementations must implement the interface
  serveLink(port, methods, [{ note: () => undefined }], () => undefined);
}
void typeChecks;
