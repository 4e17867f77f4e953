// Limits per caller across a reload of the tokens (SIGHUP: docs/operations.md#reloading-tokens): a
// token that stays keeps what it has used, a new token starts with nothing, a token whose limits
// are removed is no longer limited; with workers 1 and 2.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Agent, request } from 'undici';
import { sha256Hex } from '../../src/cli/token.js';
import { parseConfig } from '../../src/config/load.js';
import { AUTH, rawService, type RawService, startTestGateway, TEST_TOKEN_SHA256, type TestGateway } from '../helpers/gateway.js';
import { readBody, startReplica, type TestReplica } from '../helpers/replica.js';
import { eventually } from '../helpers/wait.js';

const OTHER = 'slc_other_token_added_by_the_reload_2222222222222222';
let replica: TestReplica;
const gateways: TestGateway[] = [];
const agent = new Agent({ connections: 16 });

before(async () => {
  replica = await startReplica(async (req, res) => {
    await readBody(req);
    res.end('{}');
  });
});

after(async () => {
  for (const tg of gateways) await tg.close();
  await agent.close();
  await replica.close();
});

function service(tokens: Record<string, unknown>[]): RawService {
  return rawService({ urls: [replica.url] }, { tokens });
}

async function status(tg: TestGateway, authorization: string): Promise<number> {
  const res = await request(tg.url('/x'), { method: 'POST', headers: { authorization }, body: '{}', dispatcher: agent });
  await res.body.dump();
  return res.statusCode;
}

for (const workers of [1, 2]) {
  test(`workers: ${workers} — a reload keeps the counts of a token that stays, and limits a new one from nothing`, async () => {
    const limited = { name: 'test', sha256: TEST_TOKEN_SHA256, limits: { requestsPerMinute: 2 } };
    const tg = await startTestGateway(service([limited]), { workers });
    gateways.push(tg);
    assert.deepEqual([await status(tg, AUTH.authorization), await status(tg, AUTH.authorization), await status(tg, AUTH.authorization)], [200, 200, 429]);

    const reloads = (): number => tg.logs.filter((l) => l.msg === 'tokens reloaded').length;
    const reload = async (tokens: Record<string, unknown>[]): Promise<void> => {
      const seen = reloads();
      tg.gateway.reload(parseConfig({ listen: { host: '127.0.0.1', port: 0 }, workers, services: [service(tokens)] }));
      // Every data plane logs it once it applied the tokens.
      await eventually(() => reloads() >= seen + (workers === 1 ? 1 : workers), 10_000, 'every data plane to apply the tokens');
    };

    const other = { name: 'other', sha256: sha256Hex(OTHER), limits: { requestsPerMinute: 1 } };
    await reload([limited, other]);
    assert.equal(await status(tg, AUTH.authorization), 429, 'the token that stayed is still over its limit');
    assert.deepEqual([await status(tg, `Bearer ${OTHER}`), await status(tg, `Bearer ${OTHER}`)], [200, 429]);

    await reload([{ name: 'test', sha256: TEST_TOKEN_SHA256 }, other]);
    assert.equal(await status(tg, AUTH.authorization), 200, 'no limits after they were removed');
    assert.equal(await status(tg, `Bearer ${OTHER}`), 429, 'the other token kept its count');
  });
}
