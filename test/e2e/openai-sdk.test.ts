// The official OpenAI Node SDK, pointed at Sluice instead of OpenAI: `baseURL` is the service's
// relay URL plus `/v1`, `apiKey` is a Sluice token. The SDK must not notice the gateway: streamed
// and non-streamed chat completions, completions, the request id it reports, and an
// authentication failure surfacing as the SDK's own error type.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { startModelServer, type ModelServer } from '../../examples/model-server.js';
import { TEST_TOKEN, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { eventually } from '../helpers/wait.js';

describe('the OpenAI SDK through the gateway', () => {
  let model: ModelServer;
  let tg: TestGateway;
  let client: OpenAI;

  before(async () => {
    model = await startModelServer({ port: 0, tokenDelayMs: 5 });
    tg = await startTestGateway(rawService({ urls: [model.url] }));
    client = new OpenAI({ baseURL: tg.url('/v1'), apiKey: TEST_TOKEN, maxRetries: 0, timeout: 20_000 });
  });

  after(async () => {
    await tg?.close();
    await model?.close();
  });

  /** The access-log line of a relayed request, by the id the caller was given. */
  async function accessLog(requestId: string): Promise<Record<string, unknown>> {
    await eventually(() => tg.logs.some((l) => l['reqId'] === requestId && l['msg'] === 'request'), 10_000, `the access log of ${requestId}`);
    return tg.logs.find((l) => l['reqId'] === requestId && l['msg'] === 'request')!;
  }

  test('a streamed chat completion arrives delta by delta, with the x-request-id', async () => {
    const { data: stream, request_id } = await client.chat.completions
      .create({ model: 'demo', messages: [{ role: 'user', content: 'hello   streaming gateway' }], stream: true })
      .withResponse();
    const deltas: string[] = [];
    let finish: string | null = null;
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      if (choice?.delta.content) deltas.push(choice.delta.content);
      if (choice?.finish_reason) finish = choice.finish_reason;
    }
    assert.equal(deltas.join(''), 'You said: hello streaming gateway');
    assert.deepEqual(deltas, ['You', ' said:', ' hello', ' streaming', ' gateway'], 'one delta per token');
    assert.equal(finish, 'stop');
    assert.ok(request_id, 'the SDK saw an x-request-id');
    const line = await accessLog(request_id);
    assert.equal(line['status'], 200);
    assert.equal(line['outcome'], 'ok');
    assert.equal(line['path'], '/v1/chat/completions');
  });

  test('a non-streamed chat completion, with _request_id', async () => {
    const completion = await client.chat.completions.create({
      model: 'demo',
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: 'what is a relay' },
      ],
    });
    assert.equal(completion.object, 'chat.completion');
    assert.equal(completion.choices[0]?.message.content, 'You said: what is a relay');
    assert.equal(completion.choices[0]?.finish_reason, 'stop');
    assert.ok(completion._request_id, 'the SDK saw an x-request-id');
    const line = await accessLog(completion._request_id);
    assert.equal(line['status'], 200);
    assert.equal(line['outcome'], 'ok');
  });

  test('a completion, streamed and not, cut at max_tokens', async () => {
    const completion = await client.completions.create({ model: 'demo', prompt: 'one two three four', max_tokens: 3 });
    assert.equal(completion.choices[0]?.text, ' You said: one');
    assert.equal(completion.choices[0]?.finish_reason, 'length');
    assert.ok(completion._request_id);

    const stream = await client.completions.create({ model: 'demo', prompt: 'one two three four', stream: true });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
    assert.equal(text, ' You said: one two three four');
  });

  test('a wrong API key is the SDK\'s AuthenticationError with Sluice\'s error body and request id', async () => {
    const wrong = new OpenAI({ baseURL: tg.url('/v1'), apiKey: 'slc_not_the_right_token', maxRetries: 0 });
    await assert.rejects(
      wrong.chat.completions.create({ model: 'demo', messages: [{ role: 'user', content: 'hi' }] }),
      (err: unknown) => {
        assert.ok(err instanceof OpenAI.AuthenticationError, `an AuthenticationError, got ${String(err)}`);
        assert.equal(err.status, 401);
        assert.equal((err.error as { code?: string } | undefined)?.code, 'unauthorized');
        assert.equal(err.headers?.get('x-sluice-error'), 'unauthorized');
        assert.ok(err.requestID, 'the error carries the x-request-id');
        return true;
      },
    );
  });
});
