// The authentication failure limit counts per caller, never per hash (docs/security.md#authentication):
// IPv4 by the whole address, IPv6 by its /64, an IPv4-mapped address as its IPv4 address, and two
// callers whose hashes collide never share a count. Through the gateway with real sockets from
// chosen loopback addresses (all of 127.0.0.0/8 is local), and on the shared table itself for what
// a test cannot connect from (other IPv6 networks), across worker threads too.
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, before, test } from 'node:test';
import { Worker } from 'node:worker_threads';
import { createAuthLimiterBuffer, SharedAuthLimiter } from '../../src/data/shared-auth-limiter.js';
import { AUTH_FAILURE_LIMIT, AUTH_FAILURE_WINDOW_S } from '../../src/tunables.js';
import { AUTH, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { readBody, startReplica, type TestReplica } from '../helpers/replica.js';
import { eventually } from '../helpers/wait.js';

/** The address as uWS gives it to the limiter: 4 bytes (IPv4) or 16 (IPv6, `::` allowed). */
function ip(text: string): ArrayBuffer {
  if (!text.includes(':')) return new Uint8Array(text.split('.').map(Number)).buffer;
  const [head, tail] = text.includes('::') ? text.split('::') : [text, undefined];
  const groups = (s: string | undefined): string[] => (s === undefined || s === '' ? [] : s.split(':'));
  let words = groups(head);
  const last = groups(tail);
  let v4: number[] = [];
  const end = (tail === undefined ? words : last).at(-1);
  if (end?.includes('.') === true) {
    v4 = end.split('.').map(Number);
    (tail === undefined ? words : last).pop();
  }
  const fill = tail === undefined ? 0 : 8 - words.length - last.length - v4.length / 2;
  words = [...words, ...Array<string>(fill).fill('0'), ...last];
  const bytes = words.flatMap((w) => [Number.parseInt(w, 16) >> 8, Number.parseInt(w, 16) & 0xff]);
  return new Uint8Array([...bytes, ...v4]).buffer;
}

/** The limiter's hash before the fix: FNV-1a of the address as text, 32 bits. */
function oldHash(address: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < address.length; i++) {
    h ^= address.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h | 1;
}

/** Two loopback addresses whose old hashes are the same (a birthday search: a few hundred ms). */
function collidingLoopbackPair(): [string, string] {
  const seen = new Map<number, string>();
  for (let b = 1; b < 256; b++) {
    for (let c = 0; c < 256; c++) {
      for (let d = 1; d < 255; d++) {
        const address = `127.${b}.${c}.${d}`;
        const h = oldHash(address);
        const other = seen.get(h);
        if (other !== undefined) return [other, address];
        seen.set(h, address);
      }
    }
  }
  throw new Error('no collision found');
}

let replica: TestReplica;
let tg: TestGateway;

before(async () => {
  replica = await startReplica(async (req, res) => {
    await readBody(req);
    res.end('ok');
  });
  tg = await startTestGateway(rawService({ urls: [replica.url] }));
});

after(async () => {
  await tg.close();
  await replica.close();
});

/** A request on a fresh connection from `localAddress`; its status. */
function send(localAddress: string, authorization: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const path = new URL(tg.url('/x')).pathname;
    const req = httpRequest({ host: '127.0.0.1', port: tg.port, localAddress, agent: false, method: 'POST', path, headers: { authorization, 'content-length': '0' } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
    });
    req.on('error', reject);
    req.end();
  });
}

test('an attacker whose address hashes like the victim’s (old 32-bit hash) does not lock the victim out', async () => {
  const [attacker, victim] = collidingLoopbackPair();
  assert.equal(oldHash(attacker), oldHash(victim));
  assert.equal(await send(victim, AUTH.authorization), 200, 'the victim is served before');
  for (let i = 0; i < AUTH_FAILURE_LIMIT; i++) assert.equal(await send(attacker, `Bearer wrong${i}`), 401);
  assert.equal(await send(attacker, AUTH.authorization), 429, 'the attacker is blocked');
  assert.equal(await send(victim, AUTH.authorization), 200, 'the victim is not');
  assert.equal(await send(victim, 'Bearer wrong-once'), 401, 'and its own failure is an ordinary 401');
});

test('IPv6 callers are grouped by /64: one in the same /64 is blocked with the one that failed, one in another /64 is not', () => {
  const limiter = new SharedAuthLimiter(createAuthLimiterBuffer());
  const now = Date.now();
  for (let i = 0; i < AUTH_FAILURE_LIMIT - 1; i++) limiter.recordFailure(ip(`2001:db8:1:2::${(i + 1).toString(16)}`), now);
  assert.equal(limiter.blockedFor(ip('2001:db8:1:2::1'), now), 0, 'one failure short of the limit');
  limiter.recordFailure(ip('2001:db8:1:2:ffff:ffff:ffff:ffff'), now);
  assert.ok(limiter.blockedFor(ip('2001:db8:1:2::1'), now) > 0, 'the 20th failure from the /64 blocks it');
  assert.ok(limiter.blockedFor(ip('2001:db8:1:2:abcd::9'), now) > 0, 'every address of the /64');
  for (const other of ['2001:db8:1:3::1', '2001:db8:1::1', '2001:db9:1:2::1', '::1']) assert.equal(limiter.blockedFor(ip(other), now), 0, `${other} is another /64`);
  assert.equal(limiter.blockedFor(ip('2001:db8:1:2::1'), now + AUTH_FAILURE_WINDOW_S * 1000), 0, 'the block ends with the window');
});

test('IPv4 callers by the whole address; an IPv4-mapped IPv6 address is its IPv4 address', () => {
  const limiter = new SharedAuthLimiter(createAuthLimiterBuffer());
  const now = Date.now();
  for (let i = 0; i < AUTH_FAILURE_LIMIT; i++) limiter.recordFailure(ip(i % 2 === 0 ? '10.1.2.3' : '::ffff:10.1.2.3'), now);
  assert.ok(limiter.blockedFor(ip('10.1.2.3'), now) > 0);
  assert.ok(limiter.blockedFor(ip('::ffff:10.1.2.3'), now) > 0);
  for (const other of ['10.1.2.4', '10.1.3.3', '::ffff:10.1.2.4', '::a01:203']) assert.equal(limiter.blockedFor(ip(other), now), 0, `${other} is another caller`);
});

test('many blocked callers: a caller that never failed is never blocked', () => {
  const limiter = new SharedAuthLimiter(createAuthLimiterBuffer());
  const now = Date.now();
  const v4 = (i: number): ArrayBuffer => ip(`10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`);
  for (let i = 0; i < 6000; i++) for (let f = 0; f < AUTH_FAILURE_LIMIT; f++) limiter.recordFailure(v4(2 * i), now);
  let blocked = 0;
  for (let i = 0; i < 6000; i++) {
    assert.equal(limiter.blockedFor(v4(2 * i + 1), now), 0, 'a caller that never failed');
    if (limiter.blockedFor(v4(2 * i), now) > 0) blocked++;
  }
  assert.ok(blocked > 0);
});

test('exact across threads: failures recorded at once by four threads add up, one slot per caller', async () => {
  const buffer = createAuthLimiterBuffer();
  const go = new SharedArrayBuffer(8);
  const gate = new Int32Array(go);
  const addresses = Array.from({ length: 300 }, (_, i) => ip(`2001:db8:${i.toString(16)}::1`));
  const now = Date.now();
  const threads = 4;
  const rounds = AUTH_FAILURE_LIMIT / threads;
  const workers = Array.from(
    { length: threads },
    () => new Worker(new URL('../fixtures/auth-failure-recorder.js', import.meta.url), { workerData: { buffer, go, addresses, rounds, now } }),
  );
  const done = workers.map((w) => new Promise((resolve, reject) => w.once('message', resolve).once('error', reject)));
  await eventually(() => Atomics.load(gate, 1) === threads, 10_000, 'every thread to be ready');
  Atomics.store(gate, 0, 1);
  Atomics.notify(gate, 0);
  await Promise.all(done);
  await Promise.all(workers.map((w) => w.terminate()));
  const limiter = new SharedAuthLimiter(buffer);
  for (const address of addresses) assert.ok(limiter.blockedFor(address, now) > 0, 'every caller has its 20 failures');
});
