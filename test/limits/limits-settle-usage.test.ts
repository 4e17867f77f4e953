// tokensPerMinute is charged what each answer reported (docs/api.md#limits-per-caller), black-box:
// the real gateway on port 0 and a real replica scripted by the request body. A JSON answer's
// `usage`, a stream's last `usage`, a stream without one (one token per data event, `[DONE]`
// aside): a token with tokensPerMinute 100 is admitted while its answers have reported 99 tokens,
// and refused once they have reported 100. An answer that reports nothing settles with its
// reservation (its body's max_tokens); one whose replica fails first gives it back.
import assert from 'node:assert/strict';
import { createServer, type AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { AUTH, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { type SseReplica, startSseReplica, type StreamScript } from '../helpers/sse-replica.js';
import { eventually } from '../helpers/wait.js';

let replica: SseReplica;
const gateways: TestGateway[] = [];

before(async () => {
  replica = await startSseReplica();
});

after(async () => {
  for (const tg of gateways) await tg.close();
  await replica.close();
});

async function gateway(): Promise<TestGateway> {
  const tg = await startTestGateway(rawService({ urls: [replica.url] }, { limits: { tokensPerMinute: 100 } }));
  gateways.push(tg);
  return tg;
}

/** Sends `script` (plus `extra` fields of the request body); resolves with the status, an admitted request's once its access line is written (it has settled). */
async function send(tg: TestGateway, script: StreamScript, extra: Record<string, unknown> = {}): Promise<number> {
  const res = await fetch(tg.url('/v1/chat/completions'), { method: 'POST', headers: { ...AUTH, 'content-type': 'application/json' }, body: JSON.stringify({ ...script, ...extra }) });
  await res.text();
  if (res.status === 429) return res.status;
  const id = res.headers.get('x-request-id');
  await eventually(() => tg.logs.some((l) => l.msg === 'request' && l.reqId === id), 10_000, `the access line of ${id}`);
  return res.status;
}

function json(prompt: number, completion: number): StreamScript {
  const body = JSON.stringify({ id: 'c', choices: [{ message: { content: 'hi' } }], usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion } });
  return { contentType: 'application/json', withLength: true, pieces: [[0, body]] };
}

/** A stream of `events` chunks, then (when given) a last chunk with its usage, then `[DONE]`. */
function stream(events: number, usage?: [number, number]): StreamScript {
  const pieces: [number, string][] = [];
  for (let i = 0; i < events; i++) pieces.push([0, `data: {"choices":[{"delta":{"content":"t${i}"}}],"usage":null}\n\n`]);
  if (usage !== undefined) pieces.push([0, `data: {"choices":[],"usage":{"prompt_tokens":${usage[0]},"completion_tokens":${usage[1]}}}\n\n`]);
  pieces.push([0, 'data: [DONE]\n\n']);
  return { pieces };
}

test("a JSON answer's usage: admitted at 99 tokens reported, refused at 100", async () => {
  const tg = await gateway();
  assert.equal(await send(tg, json(30, 20)), 200);
  assert.equal(await send(tg, json(40, 9)), 200);
  assert.equal(await send(tg, json(1, 0)), 200);
  assert.equal(await send(tg, json(1, 0)), 429);
});

test("a stream's last usage, not its events: admitted at 99 tokens reported, refused at 100", async () => {
  const tg = await gateway();
  assert.equal(await send(tg, stream(3, [40, 10])), 200);
  assert.equal(await send(tg, stream(3, [40, 9])), 200);
  assert.equal(await send(tg, stream(3, [0, 1])), 200);
  assert.equal(await send(tg, stream(1)), 429);
});

test('a stream without usage: one token per data event, [DONE] aside', async () => {
  const tg = await gateway();
  assert.equal(await send(tg, stream(50)), 200);
  assert.equal(await send(tg, stream(49)), 200);
  assert.equal(await send(tg, stream(1)), 200);
  assert.equal(await send(tg, stream(1)), 429);
});

test('an answer that reports nothing settles with its reservation', async () => {
  const tg = await gateway();
  const nothing: StreamScript = { contentType: 'application/json', withLength: true, pieces: [[0, '{"error":"no usage here"}']] };
  assert.equal(await send(tg, nothing, { max_tokens: 99 }), 200);
  assert.equal(await send(tg, json(0, 1)), 200);
  assert.equal(await send(tg, json(0, 1)), 429);
});

test('a request whose replica fails before answering gives its reservation back', async () => {
  // A port nothing listens on: every request fails at the replica (502 or 503), none is answered.
  const closed = createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const port = (closed.address() as AddressInfo).port;
  await new Promise<void>((resolve) => closed.close(() => resolve()));
  const tg = await startTestGateway(rawService({ urls: [`http://127.0.0.1:${port}`] }, { limits: { tokensPerMinute: 100 } }));
  gateways.push(tg);
  const statuses: number[] = [];
  for (let i = 0; i < 3; i++) statuses.push(await send(tg, json(0, 0), { max_tokens: 100 }));
  // Each settled with nothing: the window stays empty, so none of them is refused by the limit.
  assert.ok(statuses.every((s) => s === 502 || s === 503), statuses.join(', '));
});
