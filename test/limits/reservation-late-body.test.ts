// tokensPerMinute against clients whose body comes after the head (docs/api.md#limits-per-caller),
// black-box: the real gateway, a replica that holds requests, and a raw socket that writes the head,
// then the body in later writes (as Python's `requests` does: uWS then hands over an empty first
// piece, docs/architecture.md#fact-21). A request is admitted with its reservation in hand: the
// reservation is read from the body, however it is cut, before the limit is decided; a
// reservation above the limit counts as the limit, so reservations never wrap.
import assert from 'node:assert/strict';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { after, before, test } from 'node:test';
import { AUTH, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { readBody, startReplica, type TestReplica } from '../helpers/replica.js';
import { type SplitAnswer, splitPost } from '../helpers/split-post.js';
import { eventually, within } from '../helpers/wait.js';

let replica: TestReplica;
/** Requests the replica holds until the test lets them go (path /hold), by arrival. */
const held: ServerResponse[] = [];
const gateways: TestGateway[] = [];
/** An answer that reports no usage: what a request settles with is then nothing (not its reservation). */
const NO_USAGE = JSON.stringify({ usage: { prompt_tokens: 0, completion_tokens: 0 } });

before(async () => {
  replica = await startReplica(async (req: IncomingMessage, res: ServerResponse) => {
    await readBody(req);
    res.setHeader('content-type', 'application/json');
    if (req.url === '/hold') held.push(res);
    else res.end(NO_USAGE);
  });
});

after(async () => {
  for (const res of held) res.end(NO_USAGE);
  for (const tg of gateways) await tg.close();
  await replica.close();
});

async function gateway(): Promise<TestGateway> {
  const tg = await startTestGateway(rawService({ urls: [replica.url] }, { limits: { tokensPerMinute: 1000 } }), { admin: { host: '127.0.0.1', port: 0 } });
  gateways.push(tg);
  return tg;
}

const HEADERS = { authorization: AUTH.authorization, 'content-type': 'application/json' };

function path(tg: TestGateway, p: string): string {
  return new URL(tg.url(p)).pathname;
}

/** What became of a request: its answer's status, or `replica` once the replica holds it (it was admitted). */
async function fate(answer: Promise<SplitAnswer>, heldBefore: number): Promise<number | 'replica'> {
  let status: number | undefined;
  void answer.then((a) => (status = a.status));
  await eventually(() => status !== undefined || held.length > heldBefore, 10_000, 'the request to be answered or to reach the replica');
  return status ?? 'replica';
}

async function tokensUse(tg: TestGateway): Promise<{ used: number; reserved: number }> {
  const status = (await (await fetch(`http://127.0.0.1:${tg.gateway.adminPort!}/status`)).json()) as { services: { limits: { tokensPerMinute: { used: number; reserved: number } }[] }[] };
  const { used, reserved } = status.services[0]!.limits[0]!.tokensPerMinute;
  return { used, reserved };
}

test('a body sent after its head reserves its max_tokens: whole in a later write, cut mid-key, or chunked in pieces', async () => {
  const body = JSON.stringify({ model: 'm', max_tokens: 1000, messages: [{ role: 'user', content: 'hi' }] });
  const variants: [string, Record<string, string>, string[]][] = [
    ['the body whole, after the head', HEADERS, [body]],
    ['the body cut inside "max_tokens"', HEADERS, [body.slice(0, body.indexOf('max_tok') + 7), body.slice(body.indexOf('max_tok') + 7)]],
    ['a chunked body, one chunk per write', { ...HEADERS, 'transfer-encoding': 'chunked' }, [body.slice(0, 10), body.slice(10)]],
  ];
  for (const [what, headers, parts] of variants) {
    const tg = await gateway();
    const before = held.length;
    const first = splitPost(tg.port, path(tg, '/hold'), headers, parts);
    assert.equal(await fate(first, before), 'replica', `${what}: the first request is admitted`);
    // Its 1000 tokens are reserved: the window is full until it ends.
    const second = splitPost(tg.port, path(tg, '/hold'), HEADERS, [JSON.stringify({ max_tokens: 1 })]);
    assert.equal(await fate(second, before + 1), 429, `${what}: the second request is refused while the first runs`);
    assert.equal((JSON.parse((await second).body) as { error: { limit: string } }).error.limit, 'tokensPerMinute');
    assert.deepEqual(await tokensUse(tg), { used: 1000, reserved: 1000 });
    held.splice(before, 1)[0]!.end(NO_USAGE);
    assert.equal((await within(first, 10_000, 'the first answer')).status, 200);
    await eventually(async () => (await tokensUse(tg)).reserved === 0, 10_000, 'the reservation to be given back');
  }
});

test('reservations above the limit count as the limit: three bodies of max_tokens 1e9 that come after their heads admit one, and nothing wraps', async () => {
  const tg = await gateway();
  const before = held.length;
  const body = JSON.stringify({ max_tokens: 1_000_000_000, prompt: 'x' });
  // The three heads first, then the three bodies.
  const answers = [0, 1, 2].map(() => splitPost(tg.port, path(tg, '/hold'), HEADERS, [body], 50));
  const statuses: number[] = [];
  for (const a of answers) void a.then((x) => statuses.push(x.status));
  await eventually(() => statuses.length + held.length - before === 3, 10_000, 'all three answered or at the replica');
  assert.equal(held.length - before, 1, 'one of the three is admitted: its reservation (the limit) fills the window');
  assert.deepEqual(statuses, [429, 429]);
  assert.deepEqual(await tokensUse(tg), { used: 1000, reserved: 1000 });
  // A request without max_tokens is refused too while it runs.
  assert.equal((await splitPost(tg.port, path(tg, '/x'), HEADERS, ['{}'])).status, 429);
  held.splice(before, 1)[0]!.end(NO_USAGE);
  await eventually(async () => (await tokensUse(tg)).reserved === 0, 10_000, 'the reservation to be given back');
  assert.deepEqual(await tokensUse(tg), { used: 0, reserved: 0 });
  // The window is empty again: a request of 1e9 runs alone, as one of the limit.
  assert.equal((await splitPost(tg.port, path(tg, '/x'), HEADERS, [body])).status, 200);
});
