// The `gateway listening` line names what the gateway serves: its services, and with routers and
// pools, each router's models with the service of each and each pool's services with their units
// (docs/operations.md#other-messages).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { logged, rawService, startTestGateway, TEST_TOKEN_SHA256 } from '../helpers/gateway.js';

test('gateway listening names the routers with their models and services, and the pools with their services', async () => {
  const launched = (slug: string, models: string[], units = 1): Record<string, unknown> => ({
    slug,
    models,
    tokens: [{ name: 'test', sha256: TEST_TOKEN_SHA256 }],
    replicas: { command: [process.execPath, '-e', '0'], pool: 'gpu', units },
  });
  const tg = await startTestGateway(
    [launched('chat', ['llama']) as never, launched('coder', ['qwen-coder'], 2) as never, rawService({ urls: ['http://127.0.0.1:9'] }, { slug: 'plain' })],
    { pools: [{ name: 'gpu', size: 2 }], routers: [{ slug: 'models', tokens: [{ name: 'ide', sha256: TEST_TOKEN_SHA256 }] }], workers: 1 },
  );
  try {
    const lines = logged(tg, 'gateway listening');
    assert.equal(lines.length, 1);
    assert.deepEqual(lines[0]!.services, ['chat', 'coder', 'plain']);
    assert.deepEqual(lines[0]!.routers, { models: { llama: 'chat', 'qwen-coder': 'coder' } });
    assert.deepEqual(lines[0]!.pools, { gpu: { size: 2, services: { chat: 1, coder: 2 } } });
  } finally {
    await tg.close();
  }
  const plain = await startTestGateway(rawService({ urls: ['http://127.0.0.1:9'] }), { workers: 1 });
  try {
    const line = logged(plain, 'gateway listening')[0]!;
    assert.equal('routers' in line, false, 'no routers: no key');
    assert.equal('pools' in line, false, 'no pools: no key');
  } finally {
    await plain.close();
  }
});
