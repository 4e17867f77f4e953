// HTTPS: the gateway serves TLS with the configured certificate; a client that verifies it
// (the throwaway certificate as its only CA, servername localhost) streams server-sent events
// through the gateway, each event reaching the client before the replica writes the next one.
// A renewed certificate needs a restart (uWS cannot swap it): SIGHUP says so and keeps serving.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request as httpsRequest, type RequestOptions } from 'node:https';
import type { IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import type { TLSSocket } from 'node:tls';
import { fileURLToPath } from 'node:url';
import { AUTH, rawService, startTestGateway, TEST_TOKEN_SHA256 } from '../helpers/gateway.js';
import { closedPort, readBody, startReplica } from '../helpers/replica.js';
import { makeCertificate } from '../helpers/tls.js';
import { eventually } from '../helpers/wait.js';

const CLI = fileURLToPath(new URL('../../src/cli.js', import.meta.url));
const cert = makeCertificate();
const cleanups: (() => unknown)[] = [cert.remove];
after(async () => {
  for (const c of cleanups.reverse()) await c();
});

/** An HTTPS request that verifies the gateway's certificate against `ca` for the name localhost. */
function get(port: number, path: string, ca: string, extra: RequestOptions = {}): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest({ host: '127.0.0.1', port, path, ca, servername: 'localhost', rejectUnauthorized: true, ...extra }, resolve);
    req.on('error', reject);
    if (extra.method === 'POST') req.end('{"stream":true}');
    else req.end();
  });
}

test('server-sent events stream over HTTPS through the gateway to a verifying client', async () => {
  const EVENTS = 5;
  // The replica writes event n+1 only after the client has received event n: the relay cannot
  // have buffered the answer, whatever the timing.
  const received: ((n: number) => void)[] = [];
  const waitFor = (n: number): Promise<void> => new Promise((resolve) => (received[n] = () => resolve()));
  const replica = await startReplica(async (req, res) => {
    await readBody(req);
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    for (let n = 0; n < EVENTS; n++) {
      const delivered = waitFor(n);
      res.write(`data: {"n":${n}}\n\n`);
      await delivered;
    }
    res.end('data: [DONE]\n\n');
  });
  cleanups.push(() => replica.close());
  const tg = await startTestGateway(rawService({ urls: [replica.url] }), {
    listen: { host: '127.0.0.1', port: 0, tls: { certFile: cert.certFile, keyFile: cert.keyFile } },
  });
  cleanups.push(() => tg.close());

  const res = await get(tg.port, '/api/v1/services/svc/request/v1/chat/completions', cert.cert, {
    method: 'POST',
    headers: { ...AUTH, 'content-type': 'application/json' },
  });
  assert.equal(res.statusCode, 200);
  assert.equal(res.headers['content-type'], 'text/event-stream');
  const socket = res.socket as TLSSocket;
  assert.equal(socket.authorized, true, 'the client verified the certificate');
  assert.equal(socket.getPeerCertificate().subject.CN, 'server');

  const events: string[] = [];
  let buffered = '';
  for await (const chunk of res) {
    buffered += (chunk as Buffer).toString();
    let end: number;
    while ((end = buffered.indexOf('\n\n')) >= 0) {
      const event = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      events.push(event);
      const n = /"n":(\d+)/.exec(event)?.[1];
      if (n !== undefined) received[Number(n)]?.(Number(n));
    }
  }
  assert.deepEqual(events, [...Array.from({ length: EVENTS }, (_, n) => `data: {"n":${n}}`), 'data: [DONE]']);

  // The operations endpoints answer on the same HTTPS listener.
  const health = await get(tg.port, '/healthz', cert.cert);
  assert.equal(health.statusCode, 200);
  health.resume();
});

test('a client that does not trust the certificate is refused by its own verification', async () => {
  const tg = await startTestGateway(rawService({ urls: ['http://127.0.0.1:9'] }), {
    listen: { host: '127.0.0.1', port: 0, tls: { certFile: cert.certFile, keyFile: cert.keyFile } },
  });
  cleanups.push(() => tg.close());
  const other = makeCertificate('other');
  cleanups.push(other.remove);
  await assert.rejects(get(tg.port, '/healthz', other.cert), (err: NodeJS.ErrnoException) => {
    assert.match(String(err.code), /SELF_SIGNED|UNABLE_TO_VERIFY|CERT/);
    return true;
  });
  // And plain HTTP on the HTTPS port gets no HTTP answer.
  await assert.rejects(fetch(`http://127.0.0.1:${tg.port}/healthz`));
});

test('SIGHUP with a renewed certificate: logged as needing a restart; the connection and the served certificate stay', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-tls-reload-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const certFile = join(dir, 'tls.crt');
  const keyFile = join(dir, 'tls.key');
  copyFileSync(cert.certFile, certFile);
  copyFileSync(cert.keyFile, keyFile);
  const port = await closedPort();
  const configFile = join(dir, 'config.json');
  writeFileSync(
    configFile,
    JSON.stringify({
      listen: { host: '127.0.0.1', port, tls: { certFile, keyFile } },
      services: [{ slug: 'svc', tokens: [{ name: 't', sha256: TEST_TOKEN_SHA256 }], replicas: { urls: ['http://127.0.0.1:9'] } }],
    }),
  );
  const child = spawn(process.execPath, [CLI, 'serve', '--config', configFile], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  cleanups.push(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  await eventually(() => output.includes('gateway listening'), 10_000, 'the gateway to listen');

  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  cleanups.push(() => agent.destroy());
  const first = await get(port, '/healthz', cert.cert, { agent });
  assert.equal(first.statusCode, 200);
  const firstSocket = first.socket;
  first.resume();
  await once(first, 'end');

  // Renew: a new key and certificate at the same paths.
  const renewed = makeCertificate('renewed');
  cleanups.push(renewed.remove);
  copyFileSync(renewed.certFile, certFile);
  copyFileSync(renewed.keyFile, keyFile);
  child.kill('SIGHUP');
  await eventually(() => output.includes('TLS certificate not reloaded'), 10_000, 'the reload warning');
  const warning = output.split('\n').find((l) => l.includes('TLS certificate not reloaded'))!;
  assert.deepEqual(
    { level: JSON.parse(warning).level, certFile: JSON.parse(warning).certFile, keyFile: JSON.parse(warning).keyFile },
    { level: 40, certFile, keyFile },
  );

  // The kept-alive connection still works, and new connections still get the old certificate.
  const again = await get(port, '/healthz', cert.cert, { agent });
  assert.equal(again.statusCode, 200);
  assert.equal(again.socket, firstSocket, 'the same connection');
  again.resume();
  const fresh = await get(port, '/healthz', cert.cert, { agent: false });
  assert.equal((fresh.socket as TLSSocket).getPeerCertificate().subject.CN, 'server');
  fresh.resume();

  child.kill('SIGTERM');
  const [code] = (await once(child, 'exit')) as [number | null];
  assert.equal(code, 0);
});
