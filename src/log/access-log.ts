// The access-log line of a relayed request, one per request at `info`: the same JSON line pino
// writes for `logger.info(line, 'request')`, byte for byte, built directly from its fixed fields
// instead of through pino's generic loop over an object (key checks, serializer and stringifier
// lookups, `hasOwnProperty` per key): that loop was most of pino's 10 % of the gateway's
// profile at `info`. It writes to pino's own destination with pino's level check, clock,
// bindings and line end, so the line looks the same (and goes to the same place).
//
// pino's features that change a line (mixin, log formatter, redaction or a serializer of one of
// these keys, a nested key, a streamWrite hook, a destination that wants metadata) are checked
// once; with any of them, and for a line with an `err`, the line goes through pino itself.
import { pino, type Logger } from 'pino';

/** The fields of an access-log line, in their order in the line; undefined fields are left out. */
export interface AccessLine {
  reqId: string;
  service: string;
  /** Sent to a router (docs/api.md#routers): its slug; `service` is where the model took it (the router's while not routed). */
  router?: string | undefined;
  tokenName: string;
  method: string;
  path: string;
  status: number;
  outcome: string;
  bytesIn: number;
  bytesOut: number;
  /** A chunked body was held (docs/configuration.md#chunked-uploads): what the hold kept within its bound, all of it when sent with Content-Length. */
  heldBytes: number | undefined;
  ttfbMs: number | undefined;
  ms: number;
  queuedMs: number | undefined;
  retried: true | undefined;
  /** The request got `200 text/event-stream` and keep-alive comments while it waited. */
  keptAlive: true | undefined;
  /** A streamed answer (text/event-stream): its events, time to the first, longest gap (ms). */
  events: number | undefined;
  firstEventMs: number | undefined;
  maxGapMs: number | undefined;
  /** The LLM token usage the answer reported (docs/operations.md#llm-token-usage). */
  promptTokens: number | undefined;
  completionTokens: number | undefined;
  /** The replica-side error behind a failure (describeUpstreamError). */
  err: { type: string; message: string; code: string } | undefined;
}

const INFO = 30;
const WARN = 40;
const MESSAGE = 'request';
/** The keys the fast path writes (a line with `err` goes through pino and its `err` serializer). */
const KEYS: readonly string[] = ['reqId', 'service', 'router', 'tokenName', 'method', 'path', 'status', 'outcome', 'bytesIn', 'bytesOut', 'heldBytes', 'ttfbMs', 'ms', 'queuedMs', 'retried', 'keptAlive', 'events', 'firstEventMs', 'maxGapMs', 'promptTokens', 'completionTokens', 'msg'];

/** pino's internals this reads: all exported as `pino.symbols`. */
interface PinoInternals {
  [key: symbol]: unknown;
}

const S = pino.symbols as unknown as Record<string, symbol>;

export class AccessLog {
  private readonly internals: PinoInternals;
  /** The line is built here; false: every line goes through pino. */
  readonly fast: boolean;

  constructor(private readonly logger: Logger) {
    this.internals = logger as unknown as PinoInternals;
    this.fast = fastPathApplies(this.internals);
  }

  /** The line of a request (`failed`: at `warn`, else `info`) is logged at the current level. */
  enabled(failed: boolean): boolean {
    return this.logger.levelVal <= (failed ? WARN : INFO);
  }

  /** Logs the line at `info` (`warn` if `failed`), as `logger.info(line, 'request')` would. */
  write(line: AccessLine, failed: boolean): void {
    const level = failed ? WARN : INFO;
    if (this.logger.levelVal > level) return;
    if (!this.fast || line.err !== undefined) {
      if (failed) this.logger.warn(line, MESSAGE);
      else this.logger.info(line, MESSAGE);
      return;
    }
    const p = this.internals;
    const time = (p[S['timeSym']!] as () => string)();
    let s = (p[S['lsCacheSym']!] as Record<number, string>)[level]! + time + (p[S['chindingsSym']!] as string);
    s += `,"reqId":${str(line.reqId)},"service":${str(line.service)}`;
    if (line.router !== undefined) s += `,"router":${str(line.router)}`;
    s += `,"tokenName":${str(line.tokenName)},"method":${str(line.method)},"path":${str(line.path)}`;
    s += `,"status":${num(line.status)},"outcome":${str(line.outcome)},"bytesIn":${num(line.bytesIn)},"bytesOut":${num(line.bytesOut)}`;
    if (line.heldBytes !== undefined) s += `,"heldBytes":${num(line.heldBytes)}`;
    // The durations as `round` left them (3 decimals): `millis` writes them without String(double).
    if (line.ttfbMs !== undefined) s += `,"ttfbMs":${millis(line.ttfbMs)}`;
    s += `,"ms":${millis(line.ms)}`;
    if (line.queuedMs !== undefined) s += `,"queuedMs":${millis(line.queuedMs)}`;
    if (line.retried !== undefined) s += ',"retried":true';
    if (line.keptAlive !== undefined) s += ',"keptAlive":true';
    if (line.events !== undefined) s += `,"events":${num(line.events)}`;
    if (line.firstEventMs !== undefined) s += `,"firstEventMs":${millis(line.firstEventMs)}`;
    if (line.maxGapMs !== undefined) s += `,"maxGapMs":${millis(line.maxGapMs)}`;
    if (line.promptTokens !== undefined) s += `,"promptTokens":${num(line.promptTokens)}`;
    if (line.completionTokens !== undefined) s += `,"completionTokens":${num(line.completionTokens)}`;
    s += `,"msg":"${MESSAGE}"` + (p[S['endSym']!] as string);
    (p[S['streamSym']!] as pino.DestinationStream).write(s);
  }
}

/** True when pino would write these fields as they are: nothing configured that changes them. */
function fastPathApplies(p: PinoInternals): boolean {
  const formatters = p[S['formattersSym']!] as { log?: unknown } | undefined;
  const hooks = p[S['hooksSym']!] as { streamWrite?: unknown; logMethod?: unknown } | undefined;
  const serializers = (p[S['serializersSym']!] ?? {}) as Record<string, unknown>;
  const stringifiers = (p[S['stringifiersSym']!] ?? {}) as Record<string | symbol, unknown>;
  const stream = p[S['streamSym']!] as Record<symbol, unknown> | undefined;
  const lsCache = p[S['lsCacheSym']!] as Record<number, unknown> | undefined;
  return (
    typeof p[S['timeSym']!] === 'function' &&
    typeof p[S['chindingsSym']!] === 'string' &&
    typeof p[S['endSym']!] === 'string' &&
    lsCache !== undefined &&
    typeof lsCache[INFO] === 'string' &&
    typeof lsCache[WARN] === 'string' &&
    stream !== undefined &&
    typeof (stream as { write?: unknown }).write === 'function' &&
    stream[S['needsMetadataGsym']!] !== true &&
    !p[S['mixinSym']!] &&
    !p[S['nestedKeySym']!] &&
    p[S['messageKeySym']!] === 'msg' &&
    typeof p[S['msgPrefixSym']!] !== 'string' &&
    formatters?.log === undefined &&
    hooks?.streamWrite === undefined &&
    hooks?.logMethod === undefined &&
    stringifiers[S['wildcardFirstSym']!] === undefined &&
    KEYS.every((key) => serializers[key] === undefined && stringifiers[key] === undefined)
  );
}

/** Printable ASCII without `"` and `\\`: written between quotes as it is. */
const SAFE = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;
const NODE_MAJOR = Number(process.versions.node.split('.')[0]);

/** A JSON string exactly as pino writes one (its `asString`: JSON.stringify from Node 25 on). */
function str(value: string): string {
  if (SAFE.test(value)) return `"${value}"`;
  if (NODE_MAJOR >= 25 || value.length > 100) return JSON.stringify(value);
  // pino's own escaping below Node 25: `"` and `\\` escaped, anything below U+0020 → JSON.stringify.
  let result = '';
  let last = 0;
  for (let i = 0; i < value.length; i++) {
    const point = value.charCodeAt(i);
    if (point < 32) return JSON.stringify(value);
    if (point === 34 || point === 92) {
      result += value.slice(last, i) + '\\';
      last = i;
    }
  }
  return `"${result}${value.slice(last)}"`;
}

/** A JSON number as pino writes one: non-finite numbers are null. */
function num(value: number): string {
  return Number.isFinite(value) ? String(value) : 'null';
}

/**
 * `String(ms)` for milliseconds rounded to 3 decimals (as the gateway rounds them), without the
 * shortest-double algorithm: the value is n / 1000 for an integer n, and for n below 2^43 the
 * shortest text that reads back as that double is n / 1000 written out in decimal. Anything else
 * goes to `num`.
 */
export function millis(value: number): string {
  const n = Math.round(value * 1000);
  if (!(n >= 0 && n < 2 ** 43) || n / 1000 !== value) return num(value);
  const whole = Math.floor(n / 1000);
  const frac = n - whole * 1000;
  if (frac === 0) return String(whole);
  if (frac % 100 === 0) return `${whole}.${frac / 100}`;
  if (frac % 10 === 0) return `${whole}.${frac < 100 ? '0' : ''}${frac / 10}`;
  return `${whole}.${frac < 10 ? '00' : frac < 100 ? '0' : ''}${frac}`;
}
