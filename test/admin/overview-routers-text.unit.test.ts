// The overview page's wording of a router (src/admin/ui/routing-text.js, shipped as is and run in
// the browser), from /status's `routers`: its models, each with its service and state, and its
// limited tokens.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { UI_DIR } from '../../src/admin/page.js';

const { routerText } = (await import(pathToFileURL(`${UI_DIR}routing-text.js`).href)) as { routerText(router: unknown): string };

test('a router: how many of its models are ready and the base URL an OpenAI client takes (…/request/v1), each model with its service and state, then its limited tokens', () => {
  const router = {
    slug: 'models',
    baseUrl: 'http://127.0.0.1:8080/api/v1/services/models',
    services: ['chat', 'coder'],
    models: [
      { id: 'llama-3.1-8b', service: 'chat', state: 'ready' },
      { id: 'qwen-7b', service: 'chat', state: 'ready' },
      { id: 'coder-7b', service: 'coder', state: 'starting' },
    ],
    limits: [{ token: 'ide', concurrent: { limit: 4, used: 1 } }],
  };
  assert.equal(
    routerText(router),
    [
      'models · 2 of 3 models ready · http://127.0.0.1:8080/api/v1/services/models/request/v1',
      'llama-3.1-8b: chat · ready',
      'qwen-7b: chat · ready',
      'coder-7b: coder · starting',
      'ide: 1 of 4 in flight',
    ].join('\n'),
  );
  assert.equal(
    routerText({ slug: 'one', baseUrl: 'http://h/one', services: ['embed'], models: [{ id: 'e5', service: 'embed', state: 'cold' }], limits: [] }),
    'one · 0 of 1 model ready · http://h/one/request/v1\ne5: embed · cold',
  );
  assert.equal(routerText(undefined), '');
  assert.equal(routerText({ slug: 'x' }), '');
});
