// The demo model server, hit directly (no gateway): its three wire formats, its errors, its
// simulated model load, and the official OpenAI SDK as a client to prove the wire format.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { connect, createServer, type AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { Agent, request } from 'undici';
import { startModelServer, type ModelServer } from '../../examples/model-server.js';
import { eventually } from '../helpers/wait.js';

const TOKEN_DELAY_MS = 25;

interface SseResult {
  events: string[];
  /** ms since the request was sent, per event */
  times: number[];
  contentType: string | undefined;
  status: number;
}

async function postSse(url: string, body: unknown, dispatcher?: Agent, onEvent?: () => void): Promise<SseResult> {
  const t0 = performance.now();
  const res = await request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    ...(dispatcher ? { dispatcher } : {}),
  });
  const events: string[] = [];
  const times: number[] = [];
  let buffered = '';
  for await (const chunk of res.body) {
    buffered += (chunk as Buffer).toString('utf8');
    let end: number;
    while ((end = buffered.indexOf('\n\n')) !== -1) {
      const event = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      assert.ok(event.startsWith('data: '), `event ${JSON.stringify(event)} is a data line`);
      events.push(event.slice('data: '.length));
      times.push(performance.now() - t0);
      onEvent?.();
    }
  }
  assert.equal(buffered, '', 'nothing after the last event');
  return { events, times, contentType: res.headers['content-type'] as string | undefined, status: res.statusCode };
}

async function postJson(url: string, body: string | Buffer, contentType = 'application/json') {
  const res = await request(url, { method: 'POST', headers: { 'content-type': contentType }, body });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, text, json: text ? (JSON.parse(text) as any) : undefined };
}

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

function tryConnect(port: number): Promise<'connected' | string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve('connected');
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
}

describe('model server', () => {
  let server: ModelServer;
  before(async () => {
    server = await startModelServer({ port: 0, tokenDelayMs: TOKEN_DELAY_MS });
  });
  after(async () => {
    await server.close();
  });

  test('listens on an ephemeral port and answers /health', async () => {
    assert.ok(server.port > 0);
    assert.equal(server.url, `http://127.0.0.1:${server.port}`);
    const res = await request(`${server.url}/health`);
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['content-type'], 'application/json');
    assert.deepEqual(await res.body.json(), { status: 'ok' });
    const ready = await request(`${server.url}/v2/health/ready`);
    assert.equal(ready.statusCode, 200);
    await ready.body.dump();
  });

  test('streamed chat: one SSE event per token, flushed as generated, a finish chunk, then [DONE]', async () => {
    const maxTokens = 4;
    const { events, times, contentType, status } = await postSse(`${server.url}/v1/chat/completions`, {
      model: 'demo',
      stream: true,
      max_tokens: maxTokens,
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Hello there my good friend' },
      ],
    });
    assert.equal(status, 200);
    assert.equal(contentType, 'text/event-stream');
    assert.equal(events.length, maxTokens + 2, 'N token events, a finish event, [DONE]');
    assert.equal(events.at(-1), '[DONE]');
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
    const id = chunks[0].id;
    assert.match(id, /^chatcmpl-/);
    for (const c of chunks) {
      assert.equal(c.id, id);
      assert.equal(c.object, 'chat.completion.chunk');
      assert.equal(c.model, 'demo');
      assert.equal(typeof c.created, 'number');
      assert.equal(c.choices.length, 1);
      assert.equal(c.choices[0].index, 0);
      assert.ok(!('usage' in c), 'no usage unless stream_options.include_usage');
    }
    assert.equal(chunks[0].choices[0].delta.role, 'assistant');
    const text = chunks.slice(0, maxTokens).map((c) => c.choices[0].delta.content).join('');
    assert.equal(text, 'You said: Hello there');
    assert.ok(chunks.slice(0, maxTokens).every((c) => c.choices[0].finish_reason === null));
    assert.deepEqual(chunks[maxTokens].choices[0].delta, {});
    assert.equal(chunks[maxTokens].choices[0].finish_reason, 'length');
    // Streamed, not buffered: the first token arrives well before the last.
    assert.ok(times[maxTokens - 1]! - times[0]! >= (maxTokens - 1) * TOKEN_DELAY_MS * 0.5, `times ${times.join(', ')}`);
  });

  test('streamed chat with include_usage ends with a usage chunk; a short reply stops with "stop"', async () => {
    const { events } = await postSse(`${server.url}/v1/chat/completions`, {
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: 'user', content: [{ type: 'text', text: 'Hi' }] }],
    });
    assert.equal(events.at(-1), '[DONE]');
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
    const usage = chunks.at(-1);
    assert.deepEqual(usage.choices, []);
    assert.deepEqual(usage.usage, { prompt_tokens: 1, completion_tokens: 3, total_tokens: 4 });
    assert.equal(chunks.at(-2).choices[0].finish_reason, 'stop');
    assert.ok(chunks.slice(0, -1).every((c) => c.usage === null));
    assert.equal(chunks.slice(0, 3).map((c) => c.choices[0].delta.content).join(''), 'You said: Hi');
  });

  test('non-streamed chat: a chat.completion with Content-Length and usage', async () => {
    const res = await postJson(
      `${server.url}/v1/chat/completions`,
      JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'Hello there' }] }),
    );
    assert.equal(res.status, 200);
    assert.equal(res.headers['content-type'], 'application/json');
    assert.equal(Number(res.headers['content-length']), Buffer.byteLength(res.text));
    assert.equal(res.headers['transfer-encoding'], undefined);
    const body = res.json;
    assert.match(body.id, /^chatcmpl-/);
    assert.equal(body.object, 'chat.completion');
    assert.equal(body.model, 'tiny');
    assert.deepEqual(body.choices, [
      {
        index: 0,
        message: { role: 'assistant', content: 'You said: Hello there', refusal: null },
        logprobs: null,
        finish_reason: 'stop',
      },
    ]);
    assert.deepEqual(body.usage, { prompt_tokens: 2, completion_tokens: 4, total_tokens: 6 });
  });

  test('completions, streamed and not: text_completion objects honouring max_tokens', async () => {
    const plain = await postJson(`${server.url}/v1/completions`, JSON.stringify({ model: 'demo', prompt: 'one two three', max_tokens: 3 }));
    assert.equal(plain.status, 200);
    assert.equal(plain.json.object, 'text_completion');
    assert.match(plain.json.id, /^cmpl-/);
    assert.deepEqual(plain.json.choices, [{ index: 0, text: ' You said: one', logprobs: null, finish_reason: 'length' }]);
    assert.deepEqual(plain.json.usage, { prompt_tokens: 3, completion_tokens: 3, total_tokens: 6 });

    const { events } = await postSse(`${server.url}/v1/completions`, { prompt: 'one two three', max_tokens: 3, stream: true });
    assert.equal(events.length, 3 + 2);
    assert.equal(events.at(-1), '[DONE]');
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
    assert.ok(chunks.every((c) => c.object === 'text_completion'));
    assert.equal(chunks.map((c) => c.choices[0].text).join(''), ' You said: one');
    assert.equal(chunks.at(-1).choices[0].finish_reason, 'length');
  });

  test('OpenAI requests with bad JSON or missing fields get 400 invalid_request_error', async () => {
    const cases: Array<[string, string]> = [
      ['/v1/chat/completions', '{"messages": ['],
      ['/v1/chat/completions', '{"model":"demo"}'],
      ['/v1/chat/completions', '{"messages":[]}'],
      ['/v1/chat/completions', '{"messages":[{"role":"user","content":"x"}],"max_tokens":0}'],
      ['/v1/chat/completions', '[1,2]'],
      ['/v1/completions', '{"model":"demo"}'],
      ['/v1/completions', 'not json'],
    ];
    for (const [path, body] of cases) {
      const res = await postJson(`${server.url}${path}`, body);
      assert.equal(res.status, 400, `${path} ${body}`);
      assert.equal(res.headers['content-type'], 'application/json');
      assert.equal(res.json.error.type, 'invalid_request_error');
      assert.equal(typeof res.json.error.message, 'string');
      assert.ok('param' in res.json.error && 'code' in res.json.error);
    }
  });

  test('KServe v2 infer doubles numbers, echoes other types, keeps the request id', async () => {
    const res = await postJson(
      `${server.url}/v2/models/adder/infer`,
      JSON.stringify({
        id: 'req-1',
        inputs: [
          { name: 'x', shape: [2, 2], datatype: 'FP32', data: [[1, 2.5], [3, 4]] },
          { name: 'words', shape: [2], datatype: 'BYTES', data: ['a', 'b'] },
        ],
      }),
    );
    assert.equal(res.status, 200);
    assert.deepEqual(res.json, {
      model_name: 'adder',
      id: 'req-1',
      outputs: [
        { name: 'x', shape: [2, 2], datatype: 'FP32', data: [2, 5, 6, 8] },
        { name: 'words', shape: [2], datatype: 'BYTES', data: ['a', 'b'] },
      ],
    });

    const versioned = await postJson(
      `${server.url}/v2/models/adder/versions/7/infer`,
      JSON.stringify({ inputs: [{ name: 'n', shape: [1], datatype: 'INT64', data: [21] }] }),
    );
    assert.equal(versioned.json.model_version, '7');
    assert.equal(typeof versioned.json.id, 'string');
    assert.deepEqual(versioned.json.outputs[0].data, [42]);

    const meta = await request(`${server.url}/v2/models/adder`);
    assert.equal(meta.statusCode, 200);
    assert.equal(((await meta.body.json()) as { name: string }).name, 'adder');
  });

  test('KServe v2 infer refuses bad bodies with 400 {"error": "..."}', async () => {
    const bodies = [
      'nope',
      '{}',
      '{"inputs":[]}',
      '{"inputs":[{"name":"x","shape":[3],"datatype":"FP32","data":[1,2]}]}',
      '{"inputs":[{"name":"x","shape":[1],"datatype":"INT32","data":[1.5]}]}',
      '{"inputs":[{"name":"x","shape":[1],"datatype":"FP128","data":[1]}]}',
    ];
    for (const body of bodies) {
      const res = await postJson(`${server.url}/v2/models/m/infer`, body);
      assert.equal(res.status, 400, body);
      assert.deepEqual(Object.keys(res.json), ['error']);
      assert.equal(typeof res.json.error, 'string');
    }
  });

  test('TorchServe predictions: JSON and raw bytes, with size and SHA-256 of what arrived', async () => {
    const json = await postJson(`${server.url}/predictions/resnet`, '{"data":[1,2,3]}');
    assert.equal(json.status, 200);
    assert.deepEqual(json.json, {
      model: 'resnet',
      content_type: 'application/json',
      received_bytes: 16,
      sha256: createHash('sha256').update('{"data":[1,2,3]}').digest('hex'),
      input: { data: [1, 2, 3] },
    });

    const bytes = Buffer.alloc(300_000);
    for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 31) & 0xff;
    const raw = await postJson(`${server.url}/predictions/resnet/2.0`, bytes, 'application/octet-stream');
    assert.equal(raw.status, 200);
    assert.deepEqual(raw.json, {
      model: 'resnet',
      version: '2.0',
      content_type: 'application/octet-stream',
      received_bytes: bytes.length,
      sha256: createHash('sha256').update(bytes).digest('hex'),
    });

    const bad = await postJson(`${server.url}/predictions/resnet`, '{oops');
    assert.equal(bad.status, 400);
    assert.equal(bad.json.code, 400);
    assert.equal(bad.json.type, 'BadRequestException');
  });

  test('unknown path is 404 JSON; wrong method is 405 with Allow', async () => {
    const missing = await postJson(`${server.url}/nope`, '{}');
    assert.equal(missing.status, 404);
    assert.equal(missing.headers['content-type'], 'application/json');
    assert.equal(typeof missing.json.error, 'string');

    const openai404 = await postJson(`${server.url}/v1/nope`, '{}');
    assert.equal(openai404.status, 404);
    assert.equal(openai404.json.error.code, 'not_found');

    const get = await request(`${server.url}/v1/chat/completions`);
    assert.equal(get.statusCode, 405);
    assert.equal(get.headers['allow'], 'POST');
    await get.body.dump();

    const post = await postJson(`${server.url}/health`, '');
    assert.equal(post.status, 405);
    assert.equal(post.headers['allow'], 'GET, HEAD');
  });

  test('a body over 32 MiB is refused with 413 and the connection is closed', async () => {
    const socket = connect(server.port, '127.0.0.1');
    socket.write(
      'POST /predictions/m HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n' +
        `Content-Length: ${64 * 1024 * 1024}\r\n\r\n`,
    );
    let answer = '';
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => (answer += d));
    await new Promise<void>((resolve, reject) => {
      socket.once('close', () => resolve());
      socket.once('error', reject);
    });
    assert.match(answer, /^HTTP\/1\.1 413 /);
    assert.match(answer, /\r\nconnection: close\r\n/i);
  });

  test('a caller that goes away mid-stream does not disturb the server', async () => {
    const ac = new AbortController();
    const res = await request(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ stream: true, max_tokens: 50, messages: [{ role: 'user', content: 'a '.repeat(60) }] }),
      signal: ac.signal,
    });
    for await (const _ of res.body) {
      ac.abort();
      break;
    }
    const health = await request(`${server.url}/health`);
    assert.equal(health.statusCode, 200);
    await health.body.dump();
  });

  test('the OpenAI SDK streams and fetches chat completions and completions', async () => {
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'anything', maxRetries: 0 });

    const completion = await client.chat.completions.create({
      model: 'demo',
      max_tokens: 8,
      messages: [{ role: 'user', content: 'Hello there' }],
    });
    assert.equal(completion.object, 'chat.completion');
    assert.equal(completion.choices[0]?.message.content, 'You said: Hello there');
    assert.equal(completion.choices[0]?.finish_reason, 'stop');
    assert.equal(completion.usage?.completion_tokens, 4);

    const stream = await client.chat.completions.create({
      model: 'demo',
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: 'user', content: 'Hello there' }],
    });
    let text = '';
    let finish: string | null | undefined;
    let chunks = 0;
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      chunks++;
      text += chunk.choices[0]?.delta.content ?? '';
      finish ??= chunk.choices[0]?.finish_reason;
      if (chunk.usage) usage = chunk.usage;
    }
    assert.equal(text, 'You said: Hello there');
    assert.equal(finish, 'stop');
    assert.equal(chunks, 4 + 1 + 1);
    assert.equal(usage?.total_tokens, 6);

    // The SDK's stream helper reassembles the deltas into a whole message.
    const runner = client.chat.completions.stream({ model: 'demo', messages: [{ role: 'user', content: 'Hi you' }] });
    const final = await runner.finalChatCompletion();
    assert.equal(final.choices[0]?.message.content, 'You said: Hi you');

    const legacy = await client.completions.create({ model: 'demo', prompt: 'abc', max_tokens: 2 });
    assert.equal(legacy.choices[0]?.text, ' You said:');
    assert.equal(legacy.choices[0]?.finish_reason, 'length');

    const models = await client.models.list();
    assert.deepEqual(
      models.data.map((m) => m.id),
      ['demo'],
    );
  });
});

describe('model server lifecycle', () => {
  test('with startupDelayMs the port refuses connections until the model is loaded', async () => {
    const port = await freePort();
    const t0 = performance.now();
    let loaded = false;
    const starting = startModelServer({ port, startupDelayMs: 400, tokenDelayMs: 0 }).then((s) => ((loaded = true), s));
    // Every attempt that ends before the server resolves is refused (a poll, not a sleep).
    const attempts: string[] = [];
    while (!loaded) {
      const attempt = await tryConnect(port);
      // Each attempt waits for its own answer (refused, or the connection): no fixed gap between them.
      if (!loaded) attempts.push(attempt);
    }
    assert.ok(attempts.length >= 1);
    assert.deepEqual(new Set(attempts), new Set(['ECONNREFUSED']), `${attempts.length} attempts while loading`);
    const server = await starting;
    try {
      assert.ok(performance.now() - t0 >= 390, 'resolved only after the delay');
      assert.equal(server.port, port);
      const res = await request(`${server.url}/health`);
      assert.equal(res.statusCode, 200);
      await res.body.dump();
    } finally {
      await server.close();
    }
  });

  test('close() returns promptly with idle keep-alive connections open, and is idempotent', async () => {
    // A keep-alive timeout no test run outlasts: close() resolving at all means it did not wait for it.
    const server = await startModelServer({ port: 0, tokenDelayMs: 0, keepAliveTimeoutMs: 600_000 });
    const agent = new Agent({ keepAliveTimeout: 600_000 });
    try {
      for (let i = 0; i < 3; i++) {
        const res = await request(`${server.url}/health`, { dispatcher: agent });
        await res.body.dump();
      }
      await Promise.all([server.close(), server.close()]);
      assert.equal(await tryConnect(server.port), 'ECONNREFUSED');
    } finally {
      await agent.close();
    }
  });

  test('close(): a request arriving on a busy connection is answered with Connection: close, and the stream in flight finishes', async () => {
    const server = await startModelServer({ port: 0, tokenDelayMs: 20 });
    const socket = connect(server.port, '127.0.0.1');
    let answer = '';
    const closedSocket = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    socket.on('data', (d: Buffer) => (answer += d.toString('latin1')));
    const body = JSON.stringify({ stream: true, messages: [{ role: 'user', content: 'one two three four five' }] });
    socket.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    await eventually(() => answer.includes('data: '), 10_000, 'the first event of the stream');
    const closed = server.close();
    // A health probe on the same keep-alive connection, while the stream runs: answered after it.
    socket.write('GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
    await closed;
    await closedSocket;
    assert.match(answer, /data: \[DONE\]/, 'the stream in flight finished');
    const second = answer.slice(answer.indexOf('HTTP/1.1', 1));
    assert.match(second, /^HTTP\/1\.1 200 /, 'the probe was answered');
    assert.match(second, /\r\nConnection: close\r\n/i);
  });

  test('close() lets an in-flight stream finish', async () => {
    const server = await startModelServer({ port: 0, tokenDelayMs: 20 });
    const agent = new Agent({ keepAliveTimeout: 60_000 });
    try {
      let inFlight!: () => void;
      const firstEvent = new Promise<void>((resolve) => (inFlight = resolve));
      const streaming = postSse(`${server.url}/v1/chat/completions`, {
        stream: true,
        messages: [{ role: 'user', content: 'one two three four five' }],
      }, agent, () => inFlight());
      await firstEvent;
      const closed = server.close();
      const { events } = await streaming;
      assert.equal(events.at(-1), '[DONE]');
      assert.equal(events.length, 7 + 2);
      await closed;
    } finally {
      await agent.close();
    }
  });
});
