// Before worker threads listen on a port with SO_REUSEPORT, the main thread binds it once without
// that option (Node's listen does not set it) and closes it again. The bind fails when anything
// holds the port, including another Sluice whose workers share it: a second gateway process on a
// port in use fails to start with a one-line reason, as with one thread (data/listen.ts).
import { createServer } from 'node:net';

//
// Port 0 cannot be handed to the workers as it is: a socket that let the kernel choose its port
// takes no SO_REUSEPORT partner (measured with this uWS build). So the same check picks a free
// port, and the workers listen on it; if something takes it in between, the gateway picks again.

/** Binds `host:port` without SO_REUSEPORT and closes it; resolves with the port (chosen if 0). */
export function checkPortFree(host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', () => reject(new Error(`cannot listen on ${host}:${port} (address in use or not available)`)));
    server.listen({ host, port, exclusive: true }, () => {
      const address = server.address();
      const chosen = typeof address === 'object' && address !== null ? address.port : port;
      server.close(() => resolve(chosen));
    });
  });
}
