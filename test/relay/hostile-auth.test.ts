// Hostile authentication: duplicate Authorization headers, tokens of every
// length and shape (never a 500), no token in any log line, no replica started and no body read
// for an unauthenticated request to a cold service, and 429 with Retry-After for an address that
// keeps failing while other addresses are served.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { AUTH, TEST_TOKEN, assertNoSecrets, metric, rawService, secret, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startCountingReplica, type CountingReplica } from '../helpers/counting-replica.js';
import { RECORDING_REPLICA, recordFile, recorded } from '../helpers/launched.js';
import { assertSluiceError, firstLine, parseResponse, rawExchange } from '../helpers/raw-http.js';

/** Loopback addresses for the attempts, so the failure limit (20 per address) does not hide the auth path. */
let nextHost = 10;
function freshAddress(): string {
  do nextHost += 1;
  while ((nextHost & 255) === 0 || (nextHost & 255) === 255);
  return `127.0.${nextHost >> 8}.${nextHost & 255}`;
}

/** A token of `length` characters from the b64token alphabet that never occurs in a log by chance. */
function tokenOfLength(length: number): string {
  const alphabet = 'QZXJqzxj0123456789-._~+/';
  let out = '';
  for (let i = 0; i < length; i++) out += alphabet[(i * 7 + length) % alphabet.length];
  return out;
}

describe('hostile authentication', () => {
  let replica: CountingReplica;
  let tg: TestGateway;
  let base: string;
  let coldBase: string;
  const record = recordFile();
  /** Every Authorization value presented in this file. */
  const presented: string[] = [];

  before(async () => {
    replica = await startCountingReplica();
    // workers: 1, so the gateway shares this test's thread. The upload case below needs it: a
    // gateway that closes a connection while the caller is still sending a refused body resets it
    // (TCP RST on unread data), and a caller that is still writing may see the reset before it
    // reads the 401. With the gateway on its own thread (any workers > 1, or its own process) the
    // caller keeps writing at full speed and often loses that race; a lingering close (half-close,
    // then drain a bounded amount before closing) would fix it for every caller. Known, not fixed.
    tg = await startTestGateway(
      [
        rawService({ urls: [replica.url] }),
        rawService({ command: [process.execPath, RECORDING_REPLICA], env: { RECORD_FILE: record }, readyPath: '/health' }, { slug: 'cold' }),
      ],
      { workers: 1 },
    );
    base = new URL(tg.url('/')).pathname.slice(0, -1);
    coldBase = new URL(tg.url('/', 'cold')).pathname.slice(0, -1);
  });

  after(async () => {
    await tg?.close();
    await replica?.close();
  });

  function raw(path: string, authorization: string[] | undefined, body = '{}', extra = ''): string {
    for (const value of authorization ?? []) presented.push(value);
    const auth = (authorization ?? []).map((value) => `Authorization: ${value}\r\n`).join('');
    return `POST ${path} HTTP/1.1\r\nHost: x\r\n${auth}${extra}Connection: close\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
  }

  test('two Authorization headers are 400 bad_request, even when both carry the right token', async () => {
    for (const pair of [
      [`Bearer ${TEST_TOKEN}`, `Bearer ${TEST_TOKEN}`],
      [`Bearer ${TEST_TOKEN}`, `Bearer ${secret('slc_wrong_token_for_the_duplicate_case')}`],
      [`Bearer ${secret('slc_wrong_token_for_the_duplicate_case')}`, `Bearer ${TEST_TOKEN}`],
      [`Bearer ${TEST_TOKEN}`, ''],
    ]) {
      const exchange = await rawExchange(tg.port, raw(`${base}/dup`, pair), 5000, 20, freshAddress());
      assertSluiceError(parseResponse(exchange.bytes), 400, 'bad_request');
    }
    assert.equal(replica.connections(), 0);
  });

  test('tokens of every length and shape: 400, 401 or 431, never a 500, never the replica', async () => {
    const values: string[] = [];
    for (let length = 0; length <= 300; length++) values.push(`Bearer ${tokenOfLength(length)}`);
    for (const length of [511, 512, 513, 1023, 1024, 1025, 2048, 3500, 3900, 4096, 5000, 70_000]) values.push(`Bearer ${tokenOfLength(length)}`);
    const odd = [
      '',
      'Bearer',
      'Bearer ',
      'bearer ' + tokenOfLength(40),
      'BEARER ' + tokenOfLength(40),
      'Bearer  ' + tokenOfLength(40),
      'Basic ' + Buffer.from('user:' + tokenOfLength(30)).toString('base64'),
      `Bearer ${TEST_TOKEN}x`,
      `Bearer ${TEST_TOKEN.slice(0, -1)}`,
      `Bearer ${TEST_TOKEN.toUpperCase()}`,
      `Bearer x${TEST_TOKEN}`,
      `Bearer ${tokenOfLength(20)} ${tokenOfLength(21)}`,
      `Bearer ${tokenOfLength(20)},${tokenOfLength(21)}`,
      `Bearer ${tokenOfLength(20)}===`,
      `Bearer ${tokenOfLength(20)}=x`,
      `Bearer ${tokenOfLength(20)}\x7f`,
      `Bearer ${tokenOfLength(20)}\t`,
      `Bearer \xc3\xa9${tokenOfLength(20)}`,
      `Bearer ${tokenOfLength(20)}\xff`,
      `Bearer "${tokenOfLength(20)}"`,
      `Token ${tokenOfLength(30)}`,
      tokenOfLength(50),
    ];
    values.push(...odd);
    const statuses = new Map<string, number>();
    // Ten at a time, each from its own address.
    for (let i = 0; i < values.length; i += 10) {
      await Promise.all(
        values.slice(i, i + 10).map(async (value) => {
          for (const token of value.split(/[ ,"]/)) secret(token);
          const exchange = await rawExchange(tg.port, raw(`${base}/len`, [value]), 15_000, 20, freshAddress());
          const line = firstLine(exchange);
          const status = /^HTTP\/1\.1 (\d{3})/.exec(line)?.[1] ?? line;
          statuses.set(status, (statuses.get(status) ?? 0) + 1);
          assert.ok(exchange.closedByGateway, `${JSON.stringify(value.slice(0, 40))}: the connection was closed`);
          assert.ok(['400', '401', '431'].includes(status), `${JSON.stringify(value.slice(0, 60))} (length ${value.length}): ${line}`);
          if (status === '401') assertSluiceError(parseResponse(exchange.bytes), 401, 'unauthorized');
          if (status === '400' && value.length < 4000) assertSluiceError(parseResponse(exchange.bytes), 400, 'bad_request');
        }),
      );
    }
    console.log(`${values.length} Authorization values: ${JSON.stringify(Object.fromEntries(statuses))}`);
    assert.equal(replica.connections(), 0, 'no connection to the replica');
  });

  test('an unauthenticated request to a cold service starts no replica and its body is not read', async () => {
    const total = 64 * 1024 * 1024;
    for (const authorization of [undefined, [`Bearer ${secret('slc_not_a_token_of_the_cold_service_123')}`]]) {
      const socket = connect({ port: tg.port, host: '127.0.0.1', localAddress: freshAddress() });
      await once(socket, 'connect');
      let answer = '';
      socket.on('data', (d: Buffer) => (answer += d.toString('latin1')));
      let writeError: string | undefined;
      socket.on('error', (err: NodeJS.ErrnoException) => (writeError = err.code));
      const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
      const head = raw(`${coldBase}/echo`, authorization, '').replace('Content-Length: 0', `Content-Length: ${total}`);
      socket.write(head); // the head only: the body follows
      const chunk = Buffer.alloc(256 * 1024, 0x61);
      let written = 0;
      let gone = false;
      void closed.then(() => (gone = true));
      while (written < total && !gone && !socket.destroyed) {
        const ok = socket.write(chunk);
        written += chunk.length;
        if (!ok) await Promise.race([new Promise((resolve) => socket.once('drain', resolve)), closed]);
      }
      await closed;
      assert.match(answer, /^HTTP\/1\.1 401 /, 'a 401 before the body was read');
      assert.ok(written < total, `the gateway closed the connection instead of reading the body (${written} of ${total} bytes written, ${writeError ?? 'FIN'})`);
      console.log(`unauthenticated upload to a cold service: closed after ${written} of ${total} bytes written (${writeError ?? 'FIN'})`);
    }
    // A witness: an authenticated request handled after them on the gateway's thread (workers: 1),
    // by when a start they had wrongly asked for would have been logged.
    assert.equal((await fetch(tg.url('/witness'), { method: 'POST', headers: AUTH, body: '{}' })).status, 200);
    assert.ok(!tg.logs.some((l) => l.msg === 'replica process spawned'), 'no replica process was started');
    assert.deepEqual(recorded(record), []);
    assert.ok(((await metric(tg, 'sluice_queue_depth{service="cold",priority="0"}')) ?? 0) === 0, 'nothing queued');
  });

  test('repeated failures from one address: 429 with Retry-After for it, other addresses still served', async () => {
    const attacker = freshAddress();
    const connectionsBefore = replica.connections();
    for (let i = 0; i < 20; i++) {
      const exchange = await rawExchange(tg.port, raw(`${base}/x`, [`Bearer ${secret(`slc_guess_number_${i}_of_twenty_xx`)}`]), 5000, 20, attacker);
      assertSluiceError(parseResponse(exchange.bytes), 401, 'unauthorized');
    }
    for (const value of [`Bearer ${secret('slc_guess_after_the_limit_xxxxx')}`, `Bearer ${TEST_TOKEN}`, '']) {
      const exchange = await rawExchange(tg.port, raw(`${base}/x`, value === '' ? undefined : [value]), 5000, 20, attacker);
      const response = parseResponse(exchange.bytes);
      assertSluiceError(response, 429, 'too_many_requests');
      const retryAfter = Number(response.headers.get('retry-after')?.[0]);
      assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter}`);
    }
    assert.equal(replica.connections(), connectionsBefore, 'a blocked address reaches no replica');
    const other = await rawExchange(tg.port, raw(`${base}/x`, [`Bearer ${TEST_TOKEN}`]), 5000, 20, freshAddress());
    assert.match(firstLine(other), /^HTTP\/1\.1 200 /, 'another address is still served');
  });

  test('no token and no Authorization value appears in any log line', async () => {
    const text = tg.logText();
    assert.ok(text.length > 0 && tg.logs.some((l) => l.msg === 'request refused'));
    assertNoSecrets(text);
    for (const value of presented) {
      if (value.length >= 12) assert.ok(!text.includes(value), `an Authorization value appeared in the log: ${value.slice(0, 20)}…`);
    }
    assert.ok(!/bearer /i.test(text), 'no "Bearer …" in the log');
    assert.ok(!/authorization/i.test(text), 'no Authorization field in the log');
  });
});
