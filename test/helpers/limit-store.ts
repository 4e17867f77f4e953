// What the tests of the shared limit store's access (a password, TLS) share: the commands an ACL
// user of the store needs, and a request whose answer the store decided.
import { type Dispatcher, request } from 'undici';
import { AUTH, type TestGateway } from './gateway.js';

/** The commands the store needs, on its keys only (docs/operations.md#running-the-limit-store). */
export const STORE_COMMANDS = '+ping +eval +get +set +hdel +hgetall +hincrby +hset +pexpire +pttl +time +zadd +zrangebyscore +zrem';

/** One POST to the test service: its status and `X-Sluice-Error`. */
export async function storeAnswer(tg: TestGateway, dispatcher: Dispatcher): Promise<{ status: number; error: string | undefined }> {
  const res = await request(tg.url('/x'), { method: 'POST', headers: { ...AUTH, 'content-type': 'application/json' }, body: '{}', dispatcher });
  await res.body.text();
  return { status: res.statusCode, error: res.headers['x-sluice-error'] as string | undefined };
}

/** The status of a request the store decided on (a 503 limits_unavailable, too slow a store on a busy machine, used nothing: sent again). */
export async function storeDecided(tg: TestGateway, dispatcher: Dispatcher): Promise<number> {
  for (let i = 0; ; i++) {
    const a = await storeAnswer(tg, dispatcher);
    if (a.status !== 503 || a.error !== 'limits_unavailable' || i >= 20) return a.status;
  }
}
