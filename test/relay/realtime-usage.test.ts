// Realtime sessions on a router and their LLM token usage, black-box: the router takes the model
// from the `model` query parameter (as OpenAI's Realtime URL carries it) to the service serving it;
// no model, two, or an unknown one is an HTTP refusal. The usage of Realtime `response.done`
// events and vLLM's `transcription.done` is counted (`sluice_llm_tokens_total`, the session line)
// and settles the token's tokensPerMinute: a window its sessions used up refuses the next with 429.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { AUTH, logged, metric, rawService, startTestGateway, TEST_TOKEN_SHA256 } from '../helpers/gateway.js';
import { eventually } from '../helpers/wait.js';
import { startWsReplica } from '../fixtures/ws-replica.js';
import { connect, open, UWS_ASYNC_UPGRADE_CLOSE } from '../helpers/ws-client.js';

const cleanups: Array<() => Promise<void>> = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

for (const workers of [1, 2]) {
  describe(`workers: ${workers}`, { timeout: 60_000 }, () => {
    test('a router routes a session by its model query parameter; usage is counted and the session line has it', { todo: UWS_ASYNC_UPGRADE_CLOSE }, async () => {
      const a = await startWsReplica();
      const b = await startWsReplica();
      cleanups.push(() => a.close(), () => b.close());
      const services = [
        { slug: 'voice', tokens: [{ name: 'voice-caller', sha256: TEST_TOKEN_SHA256 }], models: ['gpt-realtime'], replicas: { urls: [a.url] } },
        { slug: 'stt', tokens: [{ name: 'stt-caller', sha256: TEST_TOKEN_SHA256 }], models: ['voxtral'], replicas: { urls: [b.url] } },
      ];
      const tg = await startTestGateway(services as never, { workers, routers: [{ slug: 'models', tokens: [{ name: 'router-caller', sha256: TEST_TOKEN_SHA256 }] }] });
      cleanups.push(() => tg.close());
      const c = await open(tg.url('/v1/realtime?model=voxtral', 'models'));
      await eventually(() => c.messages.length === 1, 10_000, 'session.created');
      assert.equal(b.handshakes.length, 1);
      assert.equal(b.handshakes[0]!.url, '/v1/realtime?model=voxtral');
      assert.equal(a.handshakes.length, 0);
      c.ws.send('vllm:30:7');
      c.ws.send('usage:100:20');
      await eventually(() => c.messages.length === 3, 10_000, 'both usage events');
      c.ws.close();
      await c.closed;
      await eventually(() => logged(tg, 'session').length === 1, 10_000, 'the session line');
      const line = logged(tg, 'session')[0]!;
      assert.equal(line['service'], 'stt');
      assert.equal(line['router'], 'models');
      assert.equal(line['promptTokens'], 130);
      assert.equal(line['completionTokens'], 27);
      await eventually(async () => (await metric(tg, 'sluice_llm_tokens_total{service="models",token="router-caller",kind="prompt"}')) === 130, 10_000, 'the prompt tokens counted');
      for (const [query, status] of [
        ['', 400],
        ['?model=voxtral&model=gpt-realtime', 400],
        ['?model=nope', 404],
      ] as const) {
        const refused = await connect(tg.url(`/v1/realtime${query}`, 'models'), { headers: AUTH });
        assert.ok('status' in refused && refused.status === status, `${query}: ${'status' in refused ? refused.status : 'open'}`);
      }
    });

    // Its first session can meet the uWebSockets.js build's fault (ws-client.ts): a todo until a fixed build.
    test('tokensPerMinute: usage reported in a session settles the window; the next session is refused with 429', { todo: UWS_ASYNC_UPGRADE_CLOSE }, async () => {
      const r = await startWsReplica();
      cleanups.push(() => r.close());
      const tg = await startTestGateway(rawService({ urls: [r.url] }, { limits: { tokensPerMinute: 100 } }), { workers });
      cleanups.push(() => tg.close());
      const c = await open(tg.url('/v1/realtime'));
      c.ws.send('usage:90:30');
      await eventually(() => c.messages.length === 2, 10_000, 'the usage event');
      c.ws.close();
      await c.closed;
      await eventually(() => logged(tg, 'session').length === 1, 10_000, 'the session over');
      const refused = await connect(tg.url('/v1/realtime'), { headers: AUTH });
      assert.ok('status' in refused, 'refused');
      assert.equal(refused.status, 429);
      assert.equal(refused.headers['x-sluice-error'], 'rate_limited');
    });
  });
}
