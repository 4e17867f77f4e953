// A router routes by the model the replica will read (docs/api.md#reading-a-body), black-box: a
// router limited to the service of a cheap model, in front of a replica that serves both models
// and serves the one its JSON parser reads (JSON.parse, as Python's `json`: the last key wins,
// escapes decoded). A body that names another model after the part the router routed by (past
// 1 MiB), with an escaped key, or twice with different values, is `400 bad_request`, and the
// replica never has a whole body to serve the other model from: its request is cut before its end.
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, before, test } from 'node:test';
import { sha256Hex } from '../../src/cli/token.js';
import { secret, startTestGateway, TEST_TOKEN_SHA256, type TestGateway } from '../helpers/gateway.js';
import { startReplica, type TestReplica } from '../helpers/replica.js';
import { splitPost } from '../helpers/split-post.js';
import { eventually } from '../helpers/wait.js';

const ROUTER_TOKEN = secret('slc_router_token_for_the_model_read_tests_0123456');
const AUTH = { authorization: `Bearer ${ROUTER_TOKEN}`, 'content-type': 'application/json' };
const PAD = 'p'.repeat(1100 * 1024);

let replica: TestReplica;
let tg: TestGateway;
/** Per request the replica got: the model it served, or `cut` (its body never ended). */
const served: string[] = [];

before(async () => {
  replica = await startReplica(async (req, res) => {
    const chunks: Buffer[] = [];
    try {
      for await (const chunk of req) chunks.push(chunk as Buffer);
    } catch {
      served.push('cut');
      return;
    }
    if (!req.complete) {
      served.push('cut');
      return;
    }
    const model = (JSON.parse(Buffer.concat(chunks).toString()) as { model: string }).model;
    served.push(model);
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ served: model }));
  });
  tg = await startTestGateway(
    [
      { slug: 'cheap', tokens: [{ name: 'cheap-caller', sha256: TEST_TOKEN_SHA256 }], models: ['cheap'], replicas: { urls: [replica.url] } },
      { slug: 'pricey', tokens: [{ name: 'pricey-caller', sha256: TEST_TOKEN_SHA256 }], models: ['pricey'], replicas: { urls: [replica.url] } },
    ],
    { routers: [{ slug: 'cheap-only', tokens: [{ name: 'caller', sha256: sha256Hex(ROUTER_TOKEN) }], services: ['cheap'] }] },
  );
});

after(async () => {
  await tg?.close();
  await replica?.close();
});

interface Answer {
  status: number;
  text: string;
}

/** A POST to the router: with Content-Length, or chunked in `pieces`. */
function post(pieces: string[], chunked = false): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const body = pieces.join('');
    const headers = chunked ? { ...AUTH, 'transfer-encoding': 'chunked' } : { ...AUTH, 'content-length': String(Buffer.byteLength(body)) };
    const req = httpRequest(tg.url('/v1/completions', 'cheap-only'), { method: 'POST', headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, text: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
    });
    req.on('error', reject);
    for (const p of chunked ? pieces : [body]) req.write(p);
    req.end();
  });
}

test('bodies whose model, as the replica reads it, is not the one the router would route by: 400, and the replica serves nothing', async () => {
  const cases: [string, string[], boolean][] = [
    ['a second model past the first MiB', [`{"model":"cheap","prompt":"${PAD}",`, '"model":"pricey"}'], false],
    ['a second model past the first MiB, chunked', [`{"model":"cheap","prompt":"${PAD}",`, '"model":"pricey"}'], true],
    ['an escaped key after the model, in a body over 1 MiB', [`{"model":"cheap","m\\u006fdel":"pricey","prompt":"${PAD}"}`], false],
    ['the model twice, with different values', ['{"model":"cheap","model":"pricey"}'], false],
    ['the model twice, the second escaped', ['{"model":"cheap","m\\u006fdel":"pricey"}'], false],
  ];
  for (const [what, pieces, chunked] of cases) {
    const count = served.length;
    const a = await post(pieces, chunked);
    assert.equal(a.status, 400, `${what}: ${a.text.slice(0, 200)}`);
    const error = (JSON.parse(a.text) as { error: { code: string; message: string } }).error;
    assert.equal(error.code, 'bad_request', what);
    assert.match(error.message, /"model"/, what);
    // Every request the replica got is over for it (served, or cut before its body ended).
    await eventually(() => served.length === replica.seen.length, 10_000, 'the replica to be done with what it got');
    assert.deepEqual(served.slice(count).filter((m) => m !== 'cut'), [], `${what}: the replica served no whole body`);
  }
  assert.ok(!served.includes('pricey'), 'the cheap router never reached the pricey model');
});

test('a second model that comes after the router routed and the replica has the first part: the replica\'s request is cut before the body ends, the caller gets 400', async () => {
  for (const chunked of [false, true]) {
    const count = served.length;
    const headers: Record<string, string> = chunked ? { ...AUTH, 'transfer-encoding': 'chunked' } : AUTH;
    // The first part (past the first MiB) is routed and sent on; the rest comes a scripted 200 ms later.
    const a = await splitPost(tg.port, new URL(tg.url('/v1/completions', 'cheap-only')).pathname, headers, [`{"model":"cheap","prompt":"${PAD}",`, '"model":"pricey"}'], 200);
    assert.equal(a.status, 400, a.body.slice(0, 200));
    assert.match((JSON.parse(a.body) as { error: { message: string } }).error.message, /"model" again/);
    await eventually(() => served.length === replica.seen.length, 10_000, 'the replica to be done with what it got');
    assert.deepEqual(served.slice(count), ['cut'], `chunked ${chunked}: the replica had the first part, and its request was cut`);
  }
});

test('the model as the replica reads it routes: an escaped key, the same model twice, a model repeated past the first MiB', async () => {
  for (const pieces of [['{"m\\u006fdel":"che\\u0061p"}'], ['{"model":"cheap","model":"cheap"}'], [`{"model":"cheap","prompt":"${PAD}",`, '"model":"cheap"}']]) {
    const a = await post(pieces);
    assert.equal(a.status, 200, a.text.slice(0, 200));
    assert.deepEqual(JSON.parse(a.text), { served: 'cheap' });
  }
});
