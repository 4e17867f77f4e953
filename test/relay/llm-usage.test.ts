// LLM token usage counted from the answers as they are relayed through real sockets: a JSON
// answer's `usage`, a stream's last `usage` (OpenAI's `stream_options.include_usage` chunk), a
// stream without one (one completion token per data event, `[DONE]` aside), a usage split over
// reads; and what is not counted: a non-LLM answer, `"usage"` inside a string, a JSON answer past
// 1 MiB. Seen in the access line (`promptTokens`, `completionTokens`) and in
// `sluice_llm_tokens_total{service,token,kind}`, every token's series there from the start, the
// counts of every worker thread summed.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sha256Hex } from '../../src/cli/token.js';
import { AUTH, metricSamples, rawService, startTestGateway, TEST_TOKEN_SHA256, type TestGateway } from '../helpers/gateway.js';
import { type SseReplica, startSseReplica, type StreamScript } from '../helpers/sse-replica.js';
import { eventually } from '../helpers/wait.js';
import { connectionsOnEveryWorker, type WorkerConnection } from '../helpers/workers.js';

const BATCH_TOKEN = 'slc_batch_token_for_the_llm_usage_test_0123456789ab';

function series(token: string, kind: 'prompt' | 'completion'): string {
  return `sluice_llm_tokens_total{service="svc",token="${token}",kind="${kind}"}`;
}

for (const workers of [1, 2]) {
  describe(`workers: ${workers}`, { timeout: 60_000 }, () => {
    let replica: SseReplica;
    let tg: TestGateway;
    /** One kept-alive connection per worker thread. */
    let connections: WorkerConnection[];

    before(async () => {
      replica = await startSseReplica();
      const tokens = [
        { name: 'test', sha256: TEST_TOKEN_SHA256 },
        { name: 'batch', sha256: sha256Hex(BATCH_TOKEN) },
      ];
      tg = await startTestGateway(rawService({ urls: [replica.url] }, { tokens }), { workers });
      connections = (await connectionsOnEveryWorker(tg, tg.origin, workers, 1)).map((list) => list[0]!);
    });

    after(async () => {
      for (const c of connections) await c.client.close();
      await tg.close();
      await replica.close();
    });

    async function metrics(): Promise<Map<string, number>> {
      return metricSamples(await (await fetch(`${tg.origin}/metrics`)).text());
    }

    /** Sends `script` on `c`; resolves with the answer and its access line. */
    async function send(c: WorkerConnection, script: StreamScript, auth: Record<string, string> = AUTH): Promise<{ text: string; line: Record<string, unknown> }> {
      const path = new URL(tg.url('/v1/chat/completions')).pathname;
      const res = await c.client.request({ path, method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify(script) });
      const text = await res.body.text();
      assert.equal(res.statusCode, script.status ?? 200);
      const id = String(res.headers['x-request-id']);
      await eventually(() => tg.logs.some((l) => l.msg === 'request' && l.reqId === id), 10_000, `the access line of ${id}`);
      return { text, line: tg.logs.find((l) => l.msg === 'request' && l.reqId === id)! };
    }

    /** How much each series of both tokens grew while `run` ran. */
    async function growth(run: () => Promise<void>): Promise<Record<string, number>> {
      const before = await metrics();
      await run();
      const now = await metrics();
      const out: Record<string, number> = {};
      for (const token of ['test', 'batch']) {
        for (const kind of ['prompt', 'completion'] as const) out[`${token} ${kind}`] = now.get(series(token, kind))! - before.get(series(token, kind))!;
      }
      return out;
    }

    test('every token has both kinds from the start, at 0', async () => {
      const samples = await metrics();
      for (const token of ['test', 'batch']) for (const kind of ['prompt', 'completion'] as const) assert.equal(samples.get(series(token, kind)), 0, `${token} ${kind}`);
    });

    test("a JSON answer's usage: in the access line and the metric, counted on every worker, by token", async () => {
      const grew = await growth(async () => {
        for (const [w, c] of connections.entries()) {
          const body = JSON.stringify({ id: 'c', choices: [{ message: { content: 'hello' } }], usage: { prompt_tokens: 10 + w, completion_tokens: 20 + w, total_tokens: 30 + 2 * w } });
          const { text, line } = await send(c, { contentType: 'application/json', withLength: true, pieces: [[0, body]] });
          assert.equal(text, body);
          assert.equal(line.promptTokens, 10 + w);
          assert.equal(line.completionTokens, 20 + w);
          // Chunked, and under the other token.
          const chunked = await send(c, { contentType: 'application/json; charset=utf-8', pieces: [[0, body]] }, { authorization: `Bearer ${BATCH_TOKEN}` });
          assert.equal(chunked.line.tokenName, 'batch');
          assert.equal(chunked.line.promptTokens, 10 + w);
        }
      });
      const sum = (base: number): number => connections.reduce((n, _c, w) => n + base + w, 0);
      assert.deepEqual(grew, { 'test prompt': sum(10), 'test completion': sum(20), 'batch prompt': sum(10), 'batch completion': sum(20) });
    });

    test('a stream with include_usage: the last usage counts, split over reads inside its key and inside a count', async () => {
      const chunk = (content: string): string => `data: {"choices":[{"delta":{"content":"${content}"}}],"usage":null}\n\n`;
      const last = 'data: {"choices":[],"usage":{"prompt_tokens":17,"completion_tokens":3,"total_tokens":20}}\n\n';
      const cutKey = last.indexOf('"usage"') + 3;
      const cutNumber = last.indexOf('17') + 1;
      const grew = await growth(async () => {
        for (const c of connections) {
          const pieces: [number, string][] = [
            [0, chunk('a') + chunk('b')],
            [20, chunk('c') + last.slice(0, cutKey)],
            [20, last.slice(cutKey, cutNumber)],
            [20, last.slice(cutNumber)],
            [20, 'data: [DONE]\n\n'],
          ];
          const { line } = await send(c, { pieces });
          assert.equal(line.events, 5);
          assert.equal(line.promptTokens, 17);
          assert.equal(line.completionTokens, 3);
        }
      });
      assert.deepEqual(grew, { 'test prompt': 17 * workers, 'test completion': 3 * workers, 'batch prompt': 0, 'batch completion': 0 });
    });

    test('a stream without usage: one completion token per data event, [DONE] and comments aside; no access-line fields', async () => {
      const grew = await growth(async () => {
        for (const c of connections) {
          const events = ['a', 'b', 'c', 'd'].map((t) => `data: {"choices":[{"delta":{"content":"${t}"}}]}\n\n`);
          const { line } = await send(c, { pieces: [[0, events[0]! + ': keep-alive\n\n'], [10, events[1]! + events[2]!], [10, events[3]! + 'data: [DONE]\n\n']] });
          assert.equal(line.events, 5);
          assert.equal(line.promptTokens, undefined);
          assert.equal(line.completionTokens, undefined);
        }
      });
      assert.deepEqual(grew, { 'test prompt': 0, 'test completion': 4 * workers, 'batch prompt': 0, 'batch completion': 0 });
    });

    test('not counted: a non-LLM answer, "usage" inside a string, a JSON answer past 1 MiB', async () => {
      const usage = '{"usage":{"prompt_tokens":100,"completion_tokens":100}}';
      const huge = `{"pad":"${'x'.repeat(1024 * 1024)}","usage":{"prompt_tokens":100,"completion_tokens":100}}`;
      const grew = await growth(async () => {
        for (const c of connections) {
          const answers: StreamScript[] = [
            { contentType: 'text/plain', withLength: true, pieces: [[0, usage]] },
            { contentType: 'application/octet-stream', pieces: [[0, usage]] },
            { contentType: 'application/json', withLength: true, pieces: [[0, JSON.stringify({ choices: [{ message: { content: `the ${usage} of it` } }] })]] },
            { contentType: 'application/json', withLength: true, pieces: [[0, huge]] },
            { contentType: 'application/json', pieces: [[0, huge.slice(0, 1000)], [10, huge.slice(1000)]] },
          ];
          for (const script of answers) {
            const { line } = await send(c, script);
            assert.equal(line.promptTokens, undefined, script.contentType);
            assert.equal(line.completionTokens, undefined, script.contentType);
          }
        }
      });
      assert.deepEqual(grew, { 'test prompt': 0, 'test completion': 0, 'batch prompt': 0, 'batch completion': 0 });
    });
  });
}
