// The config of routers (docs/configuration.md#many-models-behind-one-endpoint): `services[].models`
// and `routers`, every problem named by its key and rule, all of them at once.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseConfig } from '../../src/config/load.js';
import { problemsOf } from '../helpers/config.js';

const DIGEST = 'ab'.repeat(32);
const TOKENS = [{ name: 'caller', sha256: DIGEST }];

function service(slug: string, models?: unknown): Record<string, unknown> {
  return { slug, tokens: TOKENS, replicas: { urls: ['http://127.0.0.1:9000'] }, ...(models === undefined ? {} : { models }) };
}

function rules(raw: unknown): Map<string, string> {
  return new Map(problemsOf(raw).map((p) => [p.key, p.rule]));
}

test('a router with its tokens, priority and limits; services default to every service with models', () => {
  const config = parseConfig({
    services: [service('chat', ['llama', 'qwen']), service('embed'), service('coder', ['coder-7b'])],
    routers: [{ slug: 'models', tokens: [{ name: 'r', sha256: DIGEST, priority: 5, limits: { concurrent: 2 } }], limits: { requestsPerMinute: 60 } }],
  });
  assert.deepEqual(config.services[0]!.models, ['llama', 'qwen']);
  assert.equal(config.services[1]!.models, undefined);
  assert.deepEqual(config.routers, [{ slug: 'models', tokens: [{ name: 'r', sha256: DIGEST, priority: 5, limits: { concurrent: 2 } }], limits: { requestsPerMinute: 60 } }]);
  assert.equal(parseConfig({ services: [service('chat')] }).routers, undefined, 'no routers: the key stays unset');
});

test('models: unique across services and within one; non-empty strings', () => {
  const found = rules({ services: [service('chat', ['llama', 'llama', '']), service('coder', ['llama']), service('x', [])] });
  assert.match(found.get('services[0].models[1]') ?? '', /must be unique.*also models\[0\]/);
  assert.match(found.get('services[0].models[2]') ?? '', /string of 1 to 256/);
  assert.match(found.get('services[1].models[0]') ?? '', /must be unique: a model is served by one service \(also a model of service chat\)/);
  assert.match(found.get('services[2].models') ?? '', /non-empty list of model names/);
});

test('router slugs: unique among services and routers; services named must exist and serve models', () => {
  const found = rules({
    services: [service('chat', ['llama']), service('embed')],
    routers: [
      { slug: 'chat', tokens: TOKENS },
      { slug: 'all', tokens: TOKENS, services: ['chat', 'embed', 'gone', 'Bad'] },
      { slug: 'all', tokens: TOKENS },
      { slug: 'none', tokens: [] },
    ],
  });
  assert.match(found.get('routers[0].slug') ?? '', /must be unique \(also a service's slug\)/);
  assert.match(found.get('routers[1].services[1]') ?? '', /must name a service with models/);
  assert.match(found.get('routers[1].services[2]') ?? '', /must name a service of this config/);
  assert.match(found.get('routers[1].services[3]') ?? '', /must be a service's slug/);
  assert.match(found.get('routers[2].slug') ?? '', /must be unique \(also routers\[1\]\.slug\)/);
  assert.match(found.get('routers[3].tokens') ?? '', /non-empty list/);
});

test('a router with no service serving models anywhere is refused', () => {
  const found = rules({ services: [service('chat')], routers: [{ slug: 'models', tokens: TOKENS, extra: 1 }] });
  assert.match(found.get('routers[0]') ?? '', /needs a service with models/);
  assert.match(found.get('routers[0].extra') ?? '', /unknown key/);
});

test('a service without tokens: valid behind a router (reachable only through it), refused when no router routes to it', () => {
  const hidden = { slug: 'hidden', models: ['coder'], replicas: { urls: ['http://127.0.0.1:9000'] } };
  const config = parseConfig({ services: [service('chat', ['llama']), hidden], routers: [{ slug: 'models', tokens: TOKENS }] });
  assert.deepEqual(config.services[1]!.tokens, []);
  const named = parseConfig({ services: [service('chat', ['llama']), hidden], routers: [{ slug: 'models', tokens: TOKENS, services: ['hidden'] }] });
  assert.deepEqual(named.services[1]!.tokens, []);
  const rule = 'must be set, or the service served by a router: a service without tokens is reachable only through routers (give it models and a router that routes to it)';
  assert.equal(rules({ services: [hidden] }).get('services[0].tokens'), rule, 'no router');
  assert.equal(rules({ services: [service('chat', ['llama']), hidden], routers: [{ slug: 'models', tokens: TOKENS, services: ['chat'] }] }).get('services[1].tokens'), rule, 'a router that does not route to it');
  const noModels = { slug: 'plain', replicas: { urls: ['http://127.0.0.1:9000'] } };
  assert.equal(rules({ services: [service('chat', ['llama']), noModels], routers: [{ slug: 'models', tokens: TOKENS }] }).get('services[1].tokens'), rule, 'no models: no router can reach it');
  assert.deepEqual(parseConfig({ services: [service('chat', ['llama']), { ...hidden, tokens: [] }], routers: [{ slug: 'models', tokens: TOKENS }] }).services[1]!.tokens, [], 'an empty list is as none');
  assert.equal(rules({ services: [{ ...hidden, tokens: [] }] }).get('services[0].tokens'), rule, 'an empty list and no router');
  assert.match(rules({ services: [service('chat', ['llama'])], routers: [{ slug: 'models', tokens: [] }] }).get('routers[0].tokens') ?? '', /non-empty list/, "a router's tokens cannot be empty");
});

test('a router token scoped to models: names models of the router, unique; not a key of a service token', () => {
  const config = parseConfig({
    services: [service('chat', ['llama', 'qwen']), service('coder', ['coder-7b'])],
    routers: [{ slug: 'models', tokens: [{ name: 'r', sha256: DIGEST, models: ['qwen', 'coder-7b'] }] }],
  });
  assert.deepEqual(config.routers![0]!.tokens[0]!.models, ['qwen', 'coder-7b']);
  const found = rules({
    services: [service('chat', ['llama']), service('coder', ['coder-7b'])],
    routers: [
      { slug: 'models', tokens: [{ name: 'r', sha256: DIGEST, models: ['llama', 'gpt-9', 'llama'] }, { name: 's', sha256: 'cd'.repeat(32), models: [] }] },
      { slug: 'coding', services: ['coder'], tokens: [{ name: 'r', sha256: DIGEST, models: ['llama'] }] },
    ],
  });
  assert.equal(found.get('routers[0].tokens[0].models[1]'), 'must be a model this router serves (gpt-9 is not one of services[].models)');
  assert.match(found.get('routers[0].tokens[0].models[2]') ?? '', /must be unique.*also models\[0\]/);
  assert.match(found.get('routers[0].tokens[1].models') ?? '', /non-empty list of model names/);
  assert.equal(found.get('routers[1].tokens[0].models[0]'), 'must be a model this router serves (llama is served by service chat, which this router does not route to)');
  const onService = rules({ services: [{ ...service('chat', ['llama']), tokens: [{ name: 'c', sha256: DIGEST, models: ['llama'] }] }] });
  assert.equal(onService.get('services[0].tokens[0].models'), 'unknown key');
});
