// The reservation of tokensPerMinute read as the replica reads the body (docs/api.md#reading-a-body),
// black-box: a replica that holds a request, and for each spelling of `max_tokens` that Python's
// `json` and pydantic read as 1000 (a numeric string, an exponent, a fraction of zeros, the key
// twice, escaped, after a nested one or after a long message), a token of tokensPerMinute 1000
// whose first request reserves the whole window: its next request is refused while it runs. A
// value no replica reads as an integer is `400 bad_request` and reaches no replica.
import assert from 'node:assert/strict';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { after, before, test } from 'node:test';
import { Agent, request } from 'undici';
import { sha256Hex } from '../../src/cli/token.js';
import { rawService, secret, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { readBody, startReplica, type TestReplica } from '../helpers/replica.js';
import { eventually, within } from '../helpers/wait.js';

/** Each spelling, and the body that spells 1000 (or more) so. */
const SPELLINGS: [string, string][] = [
  ['a numeric string', '{"max_tokens":"1000"}'],
  ['a numeric string with spaces and a zero', '{"max_tokens":" 01000 "}'],
  ['an exponent', '{"max_tokens":1e3}'],
  ['a fraction of zeros', '{"max_tokens":1000.0}'],
  ['the key twice, the last counts', '{"max_tokens":1,"max_tokens":1000}'],
  ['an escaped key', '{"max\\u005ftokens":1000}'],
  ['a nested key first', '{"metadata":{"max_tokens":1},"max_tokens":1000}'],
  ['max_completion_tokens 0 and max_tokens', '{"max_completion_tokens":0,"max_tokens":1000}'],
  ['after a 300 KB message', JSON.stringify({ messages: [{ role: 'user', content: 'x'.repeat(300_000) }], max_tokens: 1000 })],
];

let replica: TestReplica;
let tg: TestGateway;
const held: ServerResponse[] = [];
/** Requests that reached the replica, by path. */
const reached: string[] = [];
const agent = new Agent({ connections: 16 });
const tokens = SPELLINGS.map((_, i) => secret(`slc_spelling_token_${i}_${'s'.repeat(40)}`));
const NO_USAGE = JSON.stringify({ usage: { prompt_tokens: 0, completion_tokens: 0 } });

before(async () => {
  replica = await startReplica(async (req: IncomingMessage, res: ServerResponse) => {
    await readBody(req);
    reached.push(req.url!);
    res.setHeader('content-type', 'application/json');
    if (req.url === '/hold') held.push(res);
    else res.end(NO_USAGE);
  });
  const limited = tokens.map((t, i) => ({ name: `t${i}`, sha256: sha256Hex(t), limits: { tokensPerMinute: 1000 } }));
  tg = await startTestGateway(rawService({ urls: [replica.url] }, { tokens: limited }));
});

after(async () => {
  for (const res of held) res.end(NO_USAGE);
  await tg?.close();
  await agent.close();
  await replica?.close();
});

function post(token: string, path: string, body: string): Promise<{ status: number; text: Promise<string> }> {
  return request(tg.url(path), { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body, dispatcher: agent }).then((res) => ({
    status: res.statusCode,
    text: res.body.text(),
  }));
}

test('every spelling of max_tokens a replica reads as 1000 reserves the window while its request runs', async () => {
  const missed: string[] = [];
  for (const [i, [what, body]] of SPELLINGS.entries()) {
    const before = held.length;
    const first = post(tokens[i]!, '/hold', body);
    await eventually(() => held.length > before, 10_000, `${what}: the first request at the replica`);
    // The second would be admitted below the limit: it is refused only if the first reserved 1000.
    let status: number | 'replica' | undefined;
    const second = post(tokens[i]!, '/hold', '{}');
    void second.then((a) => (status = a.status));
    await eventually(() => status !== undefined || held.length > before + 1, 10_000, `${what}: the second request answered or at the replica`);
    status ??= 'replica';
    if (status !== 429) missed.push(`${what}: ${status}`);
    for (const res of held.splice(before)) res.end(NO_USAGE);
    assert.equal((await within(first, 10_000, 'the first answer')).status, 200, what);
    await within(second, 10_000, 'the second answer');
  }
  assert.deepEqual(missed, [], 'spellings whose reservation was not read');
});

test('a max_tokens no replica reads as an integer is 400 bad_request and reaches no replica', async () => {
  for (const body of ['{"max_tokens":1000.5}', '{"max_tokens":"1e3"}', '{"max_tokens":NaN}', '{"max_tokens":[1000]}', '{"max_tokens":1,"max_tokens":"many"}']) {
    const count = reached.length;
    const a = await post(tokens[0]!, '/x', body);
    assert.equal(a.status, 400, body);
    assert.match(await a.text, /"code":"bad_request".*max_tokens/, body);
    assert.equal(reached.length, count, `${body}: nothing reached the replica`);
  }
});
