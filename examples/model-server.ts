// A small demo inference replica, written with node:http only. It speaks three wire formats:
//   - OpenAI:     POST /v1/completions, POST /v1/chat/completions (JSON or SSE), GET /v1/models
//   - KServe v2:  POST /v2/models/{model}[/versions/{v}]/infer, GET /v2/models/{model}[/ready],
//                 GET /v2, GET /v2/health/live, GET /v2/health/ready
//   - TorchServe: POST /predictions/{model}[/{version}], GET /ping
// plus GET /health for readiness probes.
//
// The "model" is a deterministic toy: a chat reply is `You said: <words of the last user message>`
// (a completion is the same, with a leading space), cut at `max_tokens` (default 16), one token
// per word, `tokenDelayMs` apart. KServe inference doubles numbers and echoes BOOL and BYTES.
// TorchServe prediction reports the size and SHA-256 of the body it received.
//
// Run it: `node dist/examples/model-server.js` (env PORT=9000, HOST=127.0.0.1, TOKEN_DELAY_MS=20,
// STARTUP_DELAY_MS=0: a simulated model load; the server does not listen until it has passed).
// Or import it: `const server = await startModelServer({ port: 0 })`.
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { realpathSync } from 'node:fs';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
// Type-only: the shapes below are checked against the official SDK's types; nothing is loaded at run time.
import type { ChatCompletion, ChatCompletionChunk } from 'openai/resources/chat/completions';
import type { Completion, CompletionUsage } from 'openai/resources/completions';

export interface ModelServerOptions {
  /** 0 picks a free port. Default 9000. */
  port?: number;
  /** Default 127.0.0.1. */
  host?: string;
  /** Delay before each generated token, in milliseconds. Default 20. */
  tokenDelayMs?: number;
  /** Simulated model load: the server does not listen until this has passed. Default 0. */
  startupDelayMs?: number;
  /** How long an idle keep-alive connection is kept open. Default 5000 (Node's). */
  keepAliveTimeoutMs?: number;
}

export interface ModelServer {
  port: number;
  /** `http://host:port`, no trailing slash. */
  url: string;
  /** Stops listening, closes idle connections, lets in-flight responses finish. Idempotent. */
  close(): Promise<void>;
}

/** Largest request body read; a larger one is answered with 413 and the connection is closed. */
export const MAX_BODY_BYTES = 32 * 1024 * 1024;
const DEFAULT_MAX_TOKENS = 16;
const MAX_MAX_TOKENS = 4096;
const DEFAULT_MODEL = 'demo';

export async function startModelServer(options: ModelServerOptions = {}): Promise<ModelServer> {
  const port = options.port ?? 9000;
  const host = options.host ?? '127.0.0.1';
  const tokenDelayMs = options.tokenDelayMs ?? 20;
  const startupDelayMs = options.startupDelayMs ?? 0;

  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    handle(req, res, tokenDelayMs).catch((err: unknown) => fail(res, familyOf(pathOf(req)), err));
  };
  const server = createServer({ keepAliveTimeout: options.keepAliveTimeoutMs ?? 5_000 }, onRequest);
  // `Expect: 100-continue`: do not invite a body that will be refused for its size.
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    if (Number(req.headers['content-length'] ?? 0) <= MAX_BODY_BYTES) res.writeContinue();
    onRequest(req, res);
  });

  if (startupDelayMs > 0) await sleep(startupDelayMs);
  await new Promise<void>((resolve, reject) => {
    const onError = (err: Error): void => reject(err);
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve();
    });
  });

  const bound = (server.address() as AddressInfo).port;
  const urlHost = host.includes(':') ? `[${host}]` : host;
  let closing: Promise<void> | undefined;
  return {
    port: bound,
    url: `http://${urlHost}:${bound}`,
    close: () => (closing ??= closeServer(server)),
  };
}

function closeServer(server: Server): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.close((err) => (err ? reject(err) : resolve()));
    server.closeIdleConnections();
    // A keep-alive connection that finishes its last response after close() would otherwise
    // stay open until the keep-alive timeout; close each one as it becomes idle. A request that
    // still arrives on one is answered with `Connection: close`, set before the route's handler
    // runs: set after it, the header threw once a quick route (a health probe) had answered,
    // and the exception took the process down with every stream still in flight.
    server.prependListener('request', (_req: IncomingMessage, res: ServerResponse) => res.setHeader('Connection', 'close'));
    const interval = setInterval(() => server.closeIdleConnections(), 50);
    interval.unref();
    server.once('close', () => clearInterval(interval));
  });
}

// ---------------------------------------------------------------------------------------------
// Routing

type Family = 'openai' | 'kserve' | 'torchserve' | 'plain';
type Handler = (ctx: Context) => Promise<void> | void;

interface Context {
  req: IncomingMessage;
  res: ServerResponse;
  params: string[];
  tokenDelayMs: number;
  family: Family;
}

interface Route {
  pattern: RegExp;
  family: Family;
  methods: Partial<Record<'GET' | 'POST', Handler>>;
}

const SEG = '([^/]+)';
const routes: Route[] = [
  { pattern: /^\/health$/, family: 'plain', methods: { GET: ({ res }) => sendJson(res, 200, { status: 'ok' }) } },
  { pattern: /^\/v1\/chat\/completions$/, family: 'openai', methods: { POST: chatCompletions } },
  { pattern: /^\/v1\/completions$/, family: 'openai', methods: { POST: completions } },
  { pattern: /^\/v1\/models$/, family: 'openai', methods: { GET: listModels } },
  { pattern: /^\/v2$/, family: 'kserve', methods: { GET: ({ res }) => sendJson(res, 200, serverMetadata()) } },
  { pattern: /^\/v2\/health\/live$/, family: 'kserve', methods: { GET: ({ res }) => sendJson(res, 200, { live: true }) } },
  { pattern: /^\/v2\/health\/ready$/, family: 'kserve', methods: { GET: ({ res }) => sendJson(res, 200, { ready: true }) } },
  { pattern: new RegExp(`^/v2/models/${SEG}(?:/versions/${SEG})?$`), family: 'kserve', methods: { GET: modelMetadata } },
  { pattern: new RegExp(`^/v2/models/${SEG}(?:/versions/${SEG})?/ready$`), family: 'kserve', methods: { GET: modelReady } },
  { pattern: new RegExp(`^/v2/models/${SEG}(?:/versions/${SEG})?/infer$`), family: 'kserve', methods: { POST: kserveInfer } },
  { pattern: new RegExp(`^/predictions/${SEG}(?:/${SEG})?$`), family: 'torchserve', methods: { POST: predictions } },
  { pattern: /^\/ping$/, family: 'torchserve', methods: { GET: ({ res }) => sendJson(res, 200, { status: 'Healthy' }) } },
];

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

function pathOf(req: IncomingMessage): string {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
}

function familyOf(path: string): Family {
  if (path.startsWith('/v1/')) return 'openai';
  if (path === '/v2' || path.startsWith('/v2/')) return 'kserve';
  if (path.startsWith('/predictions/')) return 'torchserve';
  return 'plain';
}

async function handle(req: IncomingMessage, res: ServerResponse, tokenDelayMs: number): Promise<void> {
  const path = pathOf(req);
  for (const route of routes) {
    const m = route.pattern.exec(path);
    if (!m) continue;
    const method = req.method === 'HEAD' ? 'GET' : req.method;
    const handler = route.methods[method as 'GET' | 'POST'];
    if (!handler) {
      const allow = Object.keys(route.methods).flatMap((x) => (x === 'GET' ? ['GET', 'HEAD'] : [x]));
      throw new HttpError(405, `Method ${req.method} is not allowed on ${path}`, { Allow: allow.join(', ') });
    }
    const params = m.slice(1).map((s) => (s === undefined ? '' : decodeSegment(s)));
    await handler({ req, res, params, tokenDelayMs, family: route.family });
    return;
  }
  throw new HttpError(404, `No route for ${req.method} ${path}`);
}

function decodeSegment(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    throw new HttpError(400, `Bad percent-encoding in path segment "${s}"`);
  }
}

// ---------------------------------------------------------------------------------------------
// Responses and errors

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const buf = Buffer.from(JSON.stringify(body));
  res.writeHead(status, { ...headers, 'Content-Type': 'application/json', 'Content-Length': buf.length });
  res.end(buf);
}

function fail(res: ServerResponse, family: Family, err: unknown): void {
  if (res.headersSent || res.destroyed) {
    // Too late for a status: cut the connection so the caller sees an incomplete answer.
    res.destroy();
    return;
  }
  const status = err instanceof HttpError ? err.status : 500;
  const message = err instanceof HttpError ? err.message : 'Internal server error';
  const headers = err instanceof HttpError ? { ...err.headers } : {};
  if (status === 413) headers['Connection'] = 'close'; // the rest of the body is not read
  sendJson(res, status, errorBody(family, status, message), headers);
}

/** Each family answers errors in the shape its own clients expect. */
function errorBody(family: Family, status: number, message: string): unknown {
  switch (family) {
    case 'openai':
      return {
        error: {
          message,
          type: status >= 500 ? 'server_error' : 'invalid_request_error',
          param: null,
          code: status === 404 ? 'not_found' : status === 405 ? 'method_not_allowed' : null,
        },
      };
    case 'torchserve': {
      const type: Record<number, string> = {
        400: 'BadRequestException',
        404: 'ResourceNotFoundException',
        405: 'MethodNotAllowedException',
        413: 'RequestEntityTooLargeException',
      };
      return { code: status, type: type[status] ?? 'InternalServerException', message };
    }
    case 'kserve':
    case 'plain':
      return { error: message };
  }
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  const tooLarge = (): HttpError => new HttpError(413, `Request body is larger than ${MAX_BODY_BYTES} bytes`);
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > MAX_BODY_BYTES) return Promise.reject(tooLarge());
  // Listeners, not `for await`: leaving a for-await loop early destroys the socket, and then
  // the 413 could not be sent.
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    const done = (err: Error | null): void => {
      req.off('data', onData).off('end', onEnd).off('error', onError).off('close', onClose);
      if (err) {
        req.pause();
        reject(err);
      } else {
        resolve(Buffer.concat(chunks, total));
      }
    };
    const onData = (chunk: Buffer): void => {
      total += chunk.length;
      if (total > MAX_BODY_BYTES) done(tooLarge());
      else chunks.push(chunk);
    };
    const onEnd = (): void => done(null);
    const onError = (err: Error): void => done(err);
    const onClose = (): void => done(new Error('the request was aborted'));
    req.on('data', onData).on('end', onEnd).on('error', onError).on('close', onClose);
  });
}

async function readJsonObject(req: IncomingMessage, what: string): Promise<Record<string, unknown>> {
  const body = await readBody(req);
  let value: unknown;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch {
    throw new HttpError(400, `We could not parse the JSON body of your request: expected ${what}`);
  }
  if (!isObject(value)) throw new HttpError(400, `The request body must be a JSON object (${what})`);
  return value;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

// ---------------------------------------------------------------------------------------------
// The toy model

/** Words with their leading whitespace, like a BPE tokenizer's " word" tokens. */
function tokenize(text: string): string[] {
  return text.match(/\s*\S+/g) ?? [];
}

function reply(text: string): string[] {
  const words = text.trim().split(/\s+/).filter(Boolean);
  return tokenize(words.length === 0 ? 'You said nothing.' : `You said: ${words.join(' ')}`);
}

interface Generation {
  model: string;
  tokens: string[];
  finishReason: 'stop' | 'length';
  usage: CompletionUsage;
  stream: boolean;
  includeUsage: boolean;
}

/** Validates the parameters shared by both OpenAI endpoints and runs the model. */
function generate(body: Record<string, unknown>, promptText: string, maxTokensKey: unknown): Generation {
  const model = body['model'] ?? DEFAULT_MODEL;
  if (typeof model !== 'string') throw new HttpError(400, `Invalid type for 'model': expected a string`);
  const stream = body['stream'] ?? false;
  if (typeof stream !== 'boolean') throw new HttpError(400, `Invalid type for 'stream': expected a boolean`);
  const n = body['n'] ?? 1;
  if (n !== 1) throw new HttpError(400, `Invalid value for 'n': this demo model only supports n=1`);
  const maxTokens = maxTokensKey ?? DEFAULT_MAX_TOKENS;
  if (typeof maxTokens !== 'number' || !Number.isInteger(maxTokens) || maxTokens < 1 || maxTokens > MAX_MAX_TOKENS) {
    throw new HttpError(400, `Invalid value for 'max_tokens': expected an integer from 1 to ${MAX_MAX_TOKENS}`);
  }
  const streamOptions = body['stream_options'];
  if (streamOptions != null && !isObject(streamOptions)) {
    throw new HttpError(400, `Invalid type for 'stream_options': expected an object`);
  }
  const includeUsage = stream && streamOptions?.['include_usage'] === true;

  const all = reply(promptText);
  const tokens = all.slice(0, maxTokens);
  const promptTokens = tokenize(promptText).length;
  return {
    model,
    tokens,
    finishReason: tokens.length < all.length ? 'length' : 'stop',
    usage: { prompt_tokens: promptTokens, completion_tokens: tokens.length, total_tokens: promptTokens + tokens.length },
    stream,
    includeUsage,
  };
}

function messageText(content: unknown, index: number): string {
  if (content == null) return '';
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content
      .map((part) => (isObject(part) && part['type'] === 'text' && typeof part['text'] === 'string' ? part['text'] : ''))
      .join(' ');
  }
  throw new HttpError(400, `Invalid type for 'messages[${index}].content': expected a string or an array of parts`);
}

const ROLES = new Set(['system', 'developer', 'user', 'assistant', 'tool', 'function']);

async function chatCompletions(ctx: Context): Promise<void> {
  const body = await readJsonObject(ctx.req, 'a chat completion request');
  const messages = body['messages'];
  if (!Array.isArray(messages) || messages.length === 0) {
    throw new HttpError(400, `Missing required parameter: 'messages' (a non-empty array)`);
  }
  let lastUser = '';
  const texts: string[] = [];
  messages.forEach((m, i) => {
    if (!isObject(m) || typeof m['role'] !== 'string' || !ROLES.has(m['role'])) {
      throw new HttpError(400, `Invalid value for 'messages[${i}]': expected an object with a valid 'role'`);
    }
    const text = messageText(m['content'], i);
    texts.push(text);
    if (m['role'] === 'user') lastUser = text;
  });
  const gen = generate(body, lastUser, body['max_completion_tokens'] ?? body['max_tokens']);
  const usage = { ...gen.usage, prompt_tokens: tokenize(texts.join(' ')).length };
  usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;
  const id = `chatcmpl-${randomBytes(12).toString('hex')}`;
  const created = Math.floor(Date.now() / 1000);

  if (!gen.stream) {
    await generationDelay(ctx, gen.tokens.length);
    if (ctx.res.destroyed) return;
    const answer: ChatCompletion = {
      id,
      object: 'chat.completion',
      created,
      model: gen.model,
      choices: [
        {
          index: 0,
          message: { role: 'assistant', content: gen.tokens.join(''), refusal: null },
          logprobs: null,
          finish_reason: gen.finishReason,
        },
      ],
      usage,
    };
    sendJson(ctx.res, 200, answer);
    return;
  }

  const chunk = (choices: ChatCompletionChunk['choices'], withUsage?: CompletionUsage): ChatCompletionChunk => ({
    id,
    object: 'chat.completion.chunk',
    created,
    model: gen.model,
    choices,
    ...(gen.includeUsage ? { usage: withUsage ?? null } : {}),
  });
  await streamEvents(ctx, gen, (token, i) =>
    chunk([
      {
        index: 0,
        delta: i === 0 ? { role: 'assistant', content: token } : { content: token },
        logprobs: null,
        finish_reason: null,
      },
    ]),
    () => chunk([{ index: 0, delta: {}, logprobs: null, finish_reason: gen.finishReason }]),
    () => chunk([], usage),
  );
}

async function completions(ctx: Context): Promise<void> {
  const body = await readJsonObject(ctx.req, 'a completion request');
  let prompt = body['prompt'];
  if (Array.isArray(prompt) && prompt.length === 1) prompt = prompt[0];
  if (typeof prompt !== 'string') {
    throw new HttpError(400, `Missing required parameter: 'prompt' (a string; this demo model takes one prompt)`);
  }
  const gen = generate(body, prompt, body['max_tokens']);
  const tokens = gen.tokens.map((t, i) => (i === 0 ? ` ${t}` : t));
  const id = `cmpl-${randomBytes(12).toString('hex')}`;
  const created = Math.floor(Date.now() / 1000);
  const answer = (text: string, finish: Completion['choices'][number]['finish_reason'] | null, usage?: CompletionUsage) =>
    ({
      id,
      object: 'text_completion',
      created,
      model: gen.model,
      // finish_reason is null in the chunks before the last; the SDK's Completion type has no null.
      choices: [{ index: 0, text, logprobs: null, finish_reason: finish as Completion['choices'][number]['finish_reason'] }],
      ...(usage ? { usage } : {}),
    }) satisfies Completion;

  if (!gen.stream) {
    await generationDelay(ctx, tokens.length);
    if (ctx.res.destroyed) return;
    sendJson(ctx.res, 200, answer(tokens.join(''), gen.finishReason, gen.usage));
    return;
  }
  await streamEvents(
    ctx,
    { ...gen, tokens },
    (token) => answer(token, null),
    () => answer('', gen.finishReason),
    () => ({ id, object: 'text_completion', created, model: gen.model, choices: [], usage: gen.usage }),
  );
}

/** A non-streamed answer takes as long as the same answer streamed. */
async function generationDelay(ctx: Context, tokens: number): Promise<void> {
  if (ctx.tokenDelayMs <= 0 || tokens === 0) return;
  const ac = new AbortController();
  const onClose = (): void => ac.abort();
  ctx.res.once('close', onClose);
  try {
    await sleep(ctx.tokenDelayMs * tokens, undefined, { signal: ac.signal });
  } catch {
    // the caller went away
  } finally {
    ctx.res.off('close', onClose);
  }
}

/**
 * Server-sent events, one per token, each written (and so flushed) as soon as it is generated,
 * then a chunk with the finish reason, optionally a usage chunk, then `data: [DONE]`.
 */
async function streamEvents(
  ctx: Context,
  gen: Generation,
  tokenEvent: (token: string, index: number) => unknown,
  finishEvent: () => unknown,
  usageEvent: () => unknown,
): Promise<void> {
  const { res } = ctx;
  const ac = new AbortController();
  res.once('close', () => ac.abort()); // after the end, or when the caller goes away
  res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
  res.flushHeaders();

  const send = async (data: string): Promise<void> => {
    if (!res.write(`data: ${data}\n\n`)) await once(res, 'drain', { signal: ac.signal });
  };
  try {
    for (let i = 0; i < gen.tokens.length; i++) {
      if (ctx.tokenDelayMs > 0) await sleep(ctx.tokenDelayMs, undefined, { signal: ac.signal });
      await send(JSON.stringify(tokenEvent(gen.tokens[i]!, i)));
    }
    await send(JSON.stringify(finishEvent()));
    if (gen.includeUsage) await send(JSON.stringify(usageEvent()));
    await send('[DONE]');
    res.end();
  } catch (err) {
    if (ac.signal.aborted) return; // the caller went away: nothing more to do
    throw err;
  }
}

function listModels({ res }: Context): void {
  sendJson(res, 200, {
    object: 'list',
    data: [{ id: DEFAULT_MODEL, object: 'model', created: 0, owned_by: 'sluice-demo' }],
  });
}

// ---------------------------------------------------------------------------------------------
// KServe v2 (Open Inference Protocol)

const NUMERIC = new Set(['UINT8', 'UINT16', 'UINT32', 'UINT64', 'INT8', 'INT16', 'INT32', 'INT64', 'FP16', 'FP32', 'FP64']);
const DATATYPES = new Set([...NUMERIC, 'BOOL', 'BYTES']);

function serverMetadata(): unknown {
  return { name: 'sluice-demo-model-server', version: '1', extensions: [] };
}

function modelMetadata({ res, params }: Context): void {
  const [name, version] = params;
  sendJson(res, 200, {
    name,
    versions: [version || '1'],
    platform: 'sluice-demo',
    inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [-1] }],
    outputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [-1] }],
  });
}

function modelReady({ res, params }: Context): void {
  sendJson(res, 200, { name: params[0], ready: true });
}

interface Tensor {
  name: string;
  shape: number[];
  datatype: string;
  data: unknown[];
}

function flatten(data: unknown[]): unknown[] {
  return data.flat(Infinity as 1) as unknown[];
}

function parseTensor(input: unknown, i: number): Tensor {
  const where = `inputs[${i}]`;
  if (!isObject(input)) throw new HttpError(400, `${where} must be an object`);
  const { name, shape, datatype, data } = input;
  if (typeof name !== 'string' || name === '') throw new HttpError(400, `${where}.name must be a non-empty string`);
  if (!Array.isArray(shape) || !shape.every((d) => Number.isInteger(d) && (d as number) >= 0)) {
    throw new HttpError(400, `${where}.shape must be an array of non-negative integers`);
  }
  if (typeof datatype !== 'string' || !DATATYPES.has(datatype)) {
    throw new HttpError(400, `${where}.datatype must be one of ${[...DATATYPES].join(', ')}`);
  }
  if (!Array.isArray(data)) throw new HttpError(400, `${where}.data must be an array`);
  const flat = flatten(data);
  const elements = (shape as number[]).reduce((a, b) => a * b, 1);
  if (flat.length !== elements) {
    throw new HttpError(400, `${where}: shape [${shape.join(', ')}] needs ${elements} elements, data has ${flat.length}`);
  }
  const ok =
    datatype === 'BOOL'
      ? flat.every((x) => typeof x === 'boolean')
      : datatype === 'BYTES'
        ? flat.every((x) => typeof x === 'string')
        : datatype.startsWith('FP')
          ? flat.every((x) => typeof x === 'number' && Number.isFinite(x))
          : flat.every((x) => Number.isInteger(x));
  if (!ok) throw new HttpError(400, `${where}.data does not match datatype ${datatype}`);
  return { name, shape: shape as number[], datatype, data: flat };
}

async function kserveInfer(ctx: Context): Promise<void> {
  const [model, version] = ctx.params;
  const body = await readJsonObject(ctx.req, 'an inference request');
  const inputs = body['inputs'];
  if (!Array.isArray(inputs) || inputs.length === 0) throw new HttpError(400, `'inputs' must be a non-empty array`);
  if (body['id'] !== undefined && typeof body['id'] !== 'string') throw new HttpError(400, `'id' must be a string`);
  const outputs = inputs.map(parseTensor).map((t) => ({
    name: t.name,
    shape: t.shape,
    datatype: t.datatype,
    data: NUMERIC.has(t.datatype) ? t.data.map((x) => (x as number) * 2) : t.data,
  }));
  sendJson(ctx.res, 200, {
    model_name: model,
    ...(version ? { model_version: version } : {}),
    id: (body['id'] as string | undefined) ?? randomUUID(),
    outputs,
  });
}

// ---------------------------------------------------------------------------------------------
// TorchServe

async function predictions(ctx: Context): Promise<void> {
  const [model, version] = ctx.params;
  const body = await readBody(ctx.req);
  const contentType = ctx.req.headers['content-type'] ?? null;
  let input: unknown;
  let isJson = false;
  if (contentType !== null && /^application\/([\w.+-]+\+)?json\b/i.test(contentType)) {
    isJson = true;
    try {
      input = JSON.parse(body.toString('utf8'));
    } catch {
      throw new HttpError(400, 'Invalid JSON in request body');
    }
  }
  sendJson(ctx.res, 200, {
    model,
    ...(version ? { version } : {}),
    content_type: contentType,
    received_bytes: body.length,
    sha256: createHash('sha256').update(body).digest('hex'),
    ...(isJson ? { input } : {}),
  });
}

// ---------------------------------------------------------------------------------------------
// As a program

function intFromEnv(name: string, fallback: number, max: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0 || n > max) {
    throw new Error(`${name} must be an integer from 0 to ${max}, got "${raw}"`);
  }
  return n;
}

async function main(): Promise<void> {
  let server: ModelServer | undefined;
  let stopping = false;
  const stop = (): void => {
    if (stopping || !server) process.exit(0); // a second signal, or one during the model load
    stopping = true;
    server.close().then(
      () => process.exit(0),
      () => process.exit(0),
    );
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);

  let options: Required<Omit<ModelServerOptions, 'keepAliveTimeoutMs'>>;
  try {
    options = {
      port: intFromEnv('PORT', 9000, 65535),
      host: process.env['HOST'] || '127.0.0.1',
      tokenDelayMs: intFromEnv('TOKEN_DELAY_MS', 20, 60_000),
      startupDelayMs: intFromEnv('STARTUP_DELAY_MS', 0, 3_600_000),
    };
  } catch (err) {
    process.stderr.write(`model-server: ${(err as Error).message}\n`);
    process.exit(1);
  }
  if (options.startupDelayMs > 0) {
    process.stdout.write(`model-server: loading the model (${options.startupDelayMs} ms)\n`);
  }
  try {
    server = await startModelServer(options);
  } catch (err) {
    process.stderr.write(`model-server: cannot listen on ${options.host}:${options.port}: ${(err as Error).message}\n`);
    process.exit(1);
  }
  process.stdout.write(`model-server: ready on ${server.url} (token delay ${options.tokenDelayMs} ms)\n`);
}

function isEntryPoint(): boolean {
  const argv1 = process.argv[1];
  if (!argv1) return false;
  try {
    return import.meta.url === pathToFileURL(realpathSync(argv1)).href;
  } catch {
    return false;
  }
}

if (isEntryPoint()) void main();
