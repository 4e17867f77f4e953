// Listening on the relay port from one or several threads.
//
// One thread (`workers: 1`) listens with LIBUS_LISTEN_EXCLUSIVE_PORT, as any server would: a
// second gateway on the port fails. Several threads must share the port, so each listens with
// SO_REUSEPORT (uWS's default) and the kernel spreads connections across them (fact 14). The
// main thread first binds the port itself, briefly, without SO_REUSEPORT (gateway/port-check.ts):
// if anything holds the port that fails, and once the workers hold it a second Sluice fails the
// same check. With port 0 the first worker picks the port and the others join it.
import type { TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import type { Config } from '../config/types.js';
import { uws } from '../http/uws-build.js';

/** `uWS.LIBUS_LISTEN_EXCLUSIVE_PORT`: exported by the module, missing from its typings. */
const exclusivePort = (): number => (uws() as unknown as { LIBUS_LISTEN_EXCLUSIVE_PORT: number }).LIBUS_LISTEN_EXCLUSIVE_PORT;

/** The four-argument listen that uWS has but its typings lack. */
type ListenWithOptions = (host: string, port: number, options: number, cb: (socket: us_listen_socket | false) => void) => void;

export function listenOn(app: TemplatedApp, host: string, port: number, exclusive: boolean): Promise<us_listen_socket> {
  return new Promise((resolve, reject) => {
    (app.listen as unknown as ListenWithOptions).call(app, host, port, exclusive ? exclusivePort() : 0, (socket) => {
      if (socket === false) reject(new Error(`cannot listen on ${host}:${port} (address in use or not available)`));
      else resolve(socket);
    });
  });
}

/**
 * The relay's uWS app: plain HTTP, or HTTPS with the config's certificate and key (each worker
 * builds its own). The loader has checked both files (config/tls.ts); if uWS still cannot use
 * them (changed since, or something OpenSSL refuses), the error names the keys and files instead
 * of uWS's "App construction failed". uWS reads the files once, here: a renewed certificate is
 * served after a restart.
 */
export function createApp(tls: Config['listen']['tls']): TemplatedApp {
  if (tls === undefined) return uws().App();
  try {
    return uws().SSLApp({ cert_file_name: tls.certFile, key_file_name: tls.keyFile });
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    throw new Error(`cannot serve HTTPS with listen.tls.certFile ${tls.certFile} and listen.tls.keyFile ${tls.keyFile}: ${reason}`, { cause: err });
  }
}
