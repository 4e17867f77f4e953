// The Responses and Conversations APIs across replicas (docs/api.md#stored-state-across-replicas):
// a model server such as vLLM keeps stored responses and conversations only in the process that
// made them, so a follow-up naming one must reach that replica. Three replicas of a fixture that
// answers 404 to any id it did not make; the OpenAI Node SDK as the caller; JSON and streamed
// answers; a service and a router; one worker thread and two (each turn on another worker).
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import OpenAI from 'openai';
import { fetch as undiciFetch } from 'undici';
import { startTestGateway, TEST_TOKEN, TEST_TOKEN_SHA256, type TestGateway } from '../helpers/gateway.js';
import { startResponsesReplica, type ResponsesReplica } from '../helpers/responses-replica.js';
import { connectionsOnEveryWorker, type WorkerConnection } from '../helpers/workers.js';

const TURNS = 5;
const tokens = [{ name: 'test', sha256: TEST_TOKEN_SHA256 }];

const replicas: ResponsesReplica[] = [];
const gateways: TestGateway[] = [];
const open: WorkerConnection[] = [];

after(async () => {
  for (const c of open) await c.client.close();
  for (const g of gateways) await g.close();
  for (const r of replicas) await r.close();
});

async function threeReplicas(): Promise<ResponsesReplica[]> {
  const made = [await startResponsesReplica('a'), await startResponsesReplica('b'), await startResponsesReplica('c')];
  replicas.push(...made);
  return made;
}

async function gateway(set: ResponsesReplica[], workers: number): Promise<TestGateway> {
  const services = [{ slug: 'svc', tokens, models: ['m'], methods: ['POST', 'GET'], replicas: { urls: set.map((r) => r.replica.url) } }];
  const tg = await startTestGateway(services, { workers, routers: [{ slug: 'models', tokens }] });
  gateways.push(tg);
  return tg;
}

function sdk(baseURL: string, connection?: WorkerConnection): OpenAI {
  const options: ConstructorParameters<typeof OpenAI>[0] = { baseURL, apiKey: TEST_TOKEN, maxRetries: 0, timeout: 20_000 };
  if (connection !== undefined) {
    const dispatcher = connection.client;
    options.fetch = ((url: string, init: Record<string, unknown>) => undiciFetch(url, { ...init, dispatcher } as never)) as never;
  }
  return new OpenAI(options);
}

/** One turn: its text (`turn N at R`), streamed or not. */
async function turn(client: OpenAI, previous: string | undefined, stream: boolean): Promise<{ id: string; text: string }> {
  const body = { model: 'm', input: 'go on', ...(previous === undefined ? {} : { previous_response_id: previous }) };
  if (!stream) {
    const r = await client.responses.create(body);
    return { id: r.id, text: r.output_text };
  }
  let id = '';
  let text = '';
  for await (const event of await client.responses.create({ ...body, stream: true })) {
    if (event.type === 'response.output_text.delta') text += event.delta;
    if (event.type === 'response.completed') id = event.response.id;
  }
  return { id, text };
}

/** Five turns, each naming the one before; `clients`: the client of each turn in turn. */
async function conversation(clients: OpenAI[], stream: boolean): Promise<string[]> {
  const texts: string[] = [];
  let previous: string | undefined;
  for (let i = 0; i < TURNS; i++) {
    const t = await turn(clients[i % clients.length]!, previous, stream);
    texts.push(t.text);
    previous = t.id;
  }
  return texts;
}

function assertOneReplica(texts: string[], set: ResponsesReplica[]): void {
  const at = /at (\w)$/.exec(texts[0]!)![1]!;
  assert.deepEqual(
    texts,
    Array.from({ length: TURNS }, (_, i) => `turn ${i + 1} at ${at}`),
    'every turn answered by the replica holding the one before',
  );
  assert.deepEqual(
    set.flatMap((r) => r.unknown),
    [],
    'no request reached a replica without its state',
  );
}

describe('stored state across three replicas, one worker thread', () => {
  let set: ResponsesReplica[];
  let tg: TestGateway;

  test('five turns with previous_response_id, JSON then streamed, to a service', async () => {
    set = await threeReplicas();
    tg = await gateway(set, 1);
    const client = sdk(tg.url('/v1', 'svc'));
    assertOneReplica(await conversation([client], false), set);
    assertOneReplica(await conversation([client], true), set);
  });

  test('five turns through a router, and a response retrieved by its id', async () => {
    const client = sdk(tg.url('/v1', 'models'));
    assertOneReplica(await conversation([client], false), set);
    assertOneReplica(await conversation([client], true), set);
    const direct = sdk(tg.url('/v1', 'svc'));
    const first = await turn(direct, undefined, false);
    for (let i = 0; i < 3; i++) assert.equal((await direct.responses.retrieve(first.id)).output_text, first.text);
    assert.deepEqual(
      set.flatMap((r) => r.unknown),
      [],
    );
  });

  test('a conversation (Conversations API) and the responses in it stay on its replica', async () => {
    // A conversation is made at a service (a router routes only by a body's model), and used through both.
    const direct = sdk(tg.url('/v1', 'svc'));
    for (const base of ['svc', 'models']) {
      const client = sdk(tg.url('/v1', base));
      const conv = await direct.conversations.create({});
      assert.match(conv.id, /^conv_/);
      const texts: string[] = [];
      for (let i = 0; i < TURNS; i++) {
        const value = i % 2 === 0 ? conv.id : { id: conv.id };
        const r = await client.responses.create({ model: 'm', input: 'go on', conversation: value as never });
        texts.push(r.output_text);
      }
      assertOneReplica(texts, set);
    }
  });

  test('the replica holding a response gone: the follow-up is picked as usual (and answered 404 by a replica without it)', async () => {
    const client = sdk(tg.url('/v1', 'svc'));
    const first = await turn(client, undefined, false);
    const holder = set.find((r) => r.responses.has(first.id))!;
    await holder.close();
    const others = set.filter((r) => r !== holder);
    await assert.rejects(turn(client, first.id, false), (e: unknown) => e instanceof OpenAI.NotFoundError && /not found/.test(e.message));
    assert.deepEqual(
      others.flatMap((r) => r.unknown),
      [first.id],
      'another replica got it',
    );
    // A new conversation goes on among the others.
    const texts = await conversation([client], false);
    assert.match(texts[TURNS - 1]!, /^turn 5 at [^ ]+$/);
  });
});

describe('stored state across three replicas, two worker threads', () => {
  test('five turns with previous_response_id, each on another worker, JSON and streamed, to a service and a router', async () => {
    const set = await threeReplicas();
    const tg = await gateway(set, 2);
    const byWorker = await connectionsOnEveryWorker(tg, tg.origin, 2, 1);
    const conns = byWorker.flat();
    open.push(...conns);
    for (const base of ['svc', 'models']) {
      const clients = conns.map((c) => sdk(tg.url('/v1', base), c));
      assertOneReplica(await conversation(clients, false), set);
      assertOneReplica(await conversation(clients, true), set);
    }
  });
});
