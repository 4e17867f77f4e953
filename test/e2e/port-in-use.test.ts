// A second gateway process on a port in use fails to start, exit 1, with a one-line reason; the
// first keeps serving. With one worker the one thread listens alone on the port; with two the
// worker threads share it (SO_REUSEPORT), yet no other process may join them.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { after, test } from 'node:test';
import { request } from 'undici';
import { TEST_TOKEN_SHA256 } from '../helpers/gateway.js';
import { closedPort } from '../helpers/replica.js';
import { CLI, type CliGateway, startCliGateway } from '../helpers/workers.js';

const gateways: CliGateway[] = [];

after(async () => {
  for (const gw of gateways) if (gw.child.exitCode === null) gw.child.kill('SIGKILL');
});

for (const workers of [1, 2]) {
  test(`workers: ${workers} — a second gateway process on the same port fails with a one-line reason`, async () => {
    const port = await closedPort();
    const config = {
      workers,
      listen: { host: '127.0.0.1', port },
      services: [{ slug: 'svc', tokens: [{ name: 't', sha256: TEST_TOKEN_SHA256 }], replicas: { urls: ['http://127.0.0.1:9'] } }],
    };
    const gw = await startCliGateway(config);
    gateways.push(gw);
    assert.equal(gw.port, port);
    const secondConfig = `${gw.configFile}.second.json`;
    writeFileSync(secondConfig, JSON.stringify(config));
    const second = spawn(process.execPath, [CLI, 'serve', '--config', secondConfig], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    second.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    second.stdout.resume();
    const [code] = (await once(second, 'exit')) as [number | null];
    assert.equal(code, 1);
    assert.match(stderr, new RegExp(`^sluice: cannot start: cannot listen on 127\\.0\\.0\\.1:${port} \\(address in use or not available\\)\\n$`));
    const health = `${gw.origin}/healthz`;
    for (let i = 0; i < 4; i++) {
      const answer = await request(health);
      assert.equal(answer.statusCode, 200, 'the first gateway still answers');
      await answer.body.dump();
    }
  });
}
