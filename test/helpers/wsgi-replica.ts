// A model server as many are written: Python's own wsgiref running test/fixtures/wsgi-echo.py,
// which reads its body by CONTENT_LENGTH (a chunked body reads as empty), answers with what it
// saw, and closes its connection after each answer (wsgiref speaks HTTP/1.0).
import { type ChildProcessByStdio, spawn } from 'node:child_process';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';

const WSGI_ECHO = fileURLToPath(new URL('../../../test/fixtures/wsgi-echo.py', import.meta.url));

export interface WsgiReplica {
  url: string;
  /** Every line it printed after its port: `connection`, `request <path>`. */
  lines: string[];
  close(): Promise<void>;
}

/** What wsgi-echo.py answers: the framing it saw and the body it read. */
export interface WsgiEcho {
  contentLength: string | null;
  transferEncoding: string | null;
  read: number;
  sha256: string;
}

export async function startWsgiReplica(): Promise<WsgiReplica> {
  const child: ChildProcessByStdio<null, Readable, null> = spawn('python3', ['-u', WSGI_ECHO], { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines: string[] = [];
  let rest = '';
  const port = await new Promise<number>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`the WSGI replica exited (${code})`)));
    child.stdout.setEncoding('latin1').on('data', (text: string) => {
      const all = (rest + text).split('\n');
      rest = all.pop()!;
      for (const line of all) {
        const m = /^port (\d+)$/.exec(line);
        if (m !== null) resolve(Number(m[1]));
        else lines.push(line);
      }
    });
  });
  return {
    url: `http://127.0.0.1:${port}`,
    lines,
    close: () =>
      new Promise<void>((resolve) => {
        child.removeAllListeners('exit');
        child.once('exit', () => resolve());
        child.kill();
      }),
  };
}
