// `limits.store` and `limits.storePasswordFile` (docs/configuration.md#sharing-limits-across-gateways):
// the Redis URL `redis://[[username]:password@]host:port[/db]` (`rediss://`: the same over TLS)
// taken apart, the password file read, and the URL as it may be shown (logs, config problems): the
// password replaced by `***`.
// The password itself goes only to the Redis client (limits/store/limit-store.ts).
import { readFileSync } from 'node:fs';
import { describeFsError } from './problems.js';

/** Where the store is and who the gateway is to it. */
export interface RedisTarget {
  host: string;
  port: number;
  db: number;
  /** Percent-decoded; absent: Redis's `default` user. */
  username?: string;
  /** Percent-decoded; absent: none in the URL (maybe in limits.storePasswordFile). */
  password?: string;
  /** `rediss://`: TLS to the store (absent: plain TCP). */
  tls?: true;
}

// userinfo (RFC 3986): unreserved / pct-encoded / sub-delims / ":"; the first ':' ends the username.
const USERINFO = "[A-Za-z0-9\\-._~!$&'()*+,;=:%]*";
const URL_RE = new RegExp(`^(rediss?)://(?:(${USERINFO})@)?([^\\s/?#@]+):(\\d{1,5})(?:/(\\d{1,5}))?$`);
const SCHEME_RE = /^rediss?:\/\//;
/** What follows the user info: host, port and db as URL_RE reads them, or a host alone (the port left out). */
const HOST_PORT_RE = /^[^\s/?#@]+:\d{1,5}(?:\/\d{1,5})?$/;
const HOST_ONLY_RE = /^[^\s/?#@:]+(?:\/\d{0,5})?$/;
const CLEAN_USERINFO_RE = new RegExp(`^${USERINFO}$`);

/** The URL's parts, or the rule it breaks (in words, without the password). */
export function parseRedisUrl(url: string): RedisTarget | { problem: string } {
  const m = URL_RE.exec(url);
  if (m === null) return { problem: urlProblem(url) };
  const port = Number(m[4]);
  const db = Number(m[5] ?? 0);
  if (port < 1 || port > 65_535 || db > 65_535) return { problem: STORE_RULE };
  const target: RedisTarget = { host: m[3]!, port, db };
  if (m[1] === 'rediss') target.tls = true;
  const userinfo = m[2];
  if (userinfo === undefined) return target;
  const colon = userinfo.indexOf(':');
  const username = decode(colon < 0 ? userinfo : userinfo.slice(0, colon));
  const password = colon < 0 ? '' : decode(userinfo.slice(colon + 1));
  if (username === undefined || password === undefined) return { problem: `${STORE_RULE}; its user info has a % not followed by two hex digits of UTF-8 (write % as %25)` };
  if (colon >= 0 && password === '') return { problem: `${STORE_RULE}; the password after ':' is empty (leave out ':@' for none)` };
  if (username !== '') target.username = username;
  if (password !== '') target.password = password;
  if (username === '' && password === '') return { problem: `${STORE_RULE}; '@' without a username or password` };
  return target;
}

/** Why `url` is no store URL, as precisely as its parts tell: the port left out, or user info not percent-encoded. */
function urlProblem(url: string): string {
  const scheme = SCHEME_RE.exec(url);
  if (scheme === null) return STORE_RULE;
  const rest = url.slice(scheme[0].length);
  // The host is after the last '@': a password with an '@' of its own is the user info's problem.
  const at = rest.lastIndexOf('@');
  const host = rest.slice(at + 1);
  if (HOST_ONLY_RE.test(host)) return `${STORE_RULE}; the port is missing (Redis's own is 6379: host:6379)`;
  if (at >= 0 && HOST_PORT_RE.test(host) && !CLEAN_USERINFO_RE.test(rest.slice(0, at))) {
    return `${STORE_RULE}; its user info must be percent-encoded (@ as %40, / as %2F, ? as %3F, # as %23, % as %25)`;
  }
  return STORE_RULE;
}

export const STORE_RULE =
  'must be redis://host:port or redis://host:port/db (db an integer from 0 to 65535), with [username]:password@ before the host for a Redis that wants one (both percent-encoded), or the same with rediss:// for TLS';

function decode(s: string): string | undefined {
  try {
    return decodeURIComponent(s);
  } catch {
    return undefined;
  }
}

/**
 * A URL as written, as it may be shown (a config problem): the password replaced,
 * `redis://user:***@host:6379`; a username without a password (no ':') shown as it is,
 * `redis://user@host:6379`, as the URL's grammar reads it; user info that is neither, `***@`.
 */
export function shownRedisUrl(url: string): string {
  const at = url.lastIndexOf('@');
  if (at < 0) return url;
  const start = url.startsWith('redis://') ? 'redis://'.length : url.startsWith('rediss://') ? 'rediss://'.length : 0;
  const userinfo = url.slice(start, at);
  const colon = userinfo.indexOf(':');
  const user = colon < 0 ? userinfo : userinfo.slice(0, colon);
  const clean = /^[A-Za-z0-9\-._~!$&'()*+,;=%]*$/.test(user);
  const shown = colon >= 0 ? `${clean ? user : ''}:***` : clean ? user : '***';
  return `${url.slice(0, start)}${shown}${url.slice(at)}`;
}

/** A parsed store as it may be shown (logs): `redis://user:***@host:6379/0` (`rediss://` with TLS), `***` where a password is given (in the URL or its file). */
export function shownTarget(t: RedisTarget, withPassword: boolean): string {
  const user = t.username === undefined ? '' : encodeURIComponent(t.username);
  const userinfo = withPassword ? `${user}:***@` : user === '' ? '' : `${user}@`;
  return `${t.tls === true ? 'rediss' : 'redis'}://${userinfo}${t.host}:${t.port}/${t.db}`;
}

/** The password in `file`: its content without one trailing newline (`\n` or `\r\n`). Throws StorePasswordError. */
export function readStorePassword(file: string): string {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new StorePasswordError(`cannot be read (${describeFsError(err)})`);
  }
  const password = text.endsWith('\r\n') ? text.slice(0, -2) : text.endsWith('\n') ? text.slice(0, -1) : text;
  if (password === '') throw new StorePasswordError('must hold the password; the file is empty');
  return password;
}

/** The password file cannot give a password; `message` is the rule it breaks (never the content). */
class StorePasswordError extends Error {
  readonly code = 'store_password_file';
}

/** Problems of `limits` as a whole: where the password comes from (keys relative to `limits`). */
export function storeCredentialProblems(limits: { store?: unknown; storePasswordFile?: unknown }): { key: string; value: unknown; rule: string }[] {
  const { store, storePasswordFile: file } = limits;
  const target = typeof store === 'string' ? parseRedisUrl(store) : undefined;
  const problems: { key: string; value: unknown; rule: string }[] = [];
  if (typeof file === 'string' && file !== '') {
    if (store === undefined) problems.push({ key: 'storePasswordFile', value: file, rule: 'must be set only with limits.store' });
    else if (target !== undefined && 'host' in target && target.password !== undefined) {
      problems.push({ key: 'storePasswordFile', value: file, rule: 'must not be set when limits.store has a password: keep the password in one place' });
    } else {
      try {
        readStorePassword(file);
      } catch (err) {
        if (!(err instanceof StorePasswordError)) throw err;
        problems.push({ key: 'storePasswordFile', value: file, rule: err.message });
      }
    }
  } else if (target !== undefined && 'host' in target && target.username !== undefined && target.password === undefined) {
    problems.push({ key: 'store', value: shownRedisUrl(store as string), rule: 'has a username without a password: give it as redis://username:password@host:port, or in limits.storePasswordFile' });
  }
  return problems;
}
