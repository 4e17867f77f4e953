// curl as a real client in the tests: whether it is here (CI installs it: .ci/install-curl), and
// one run that writes the answer's body to a file and its status to standard output.
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

const IN_CI = process.env['CI'] === 'true' || process.env['CI'] === '1';
const HAVE_CURL = spawnSync('curl', ['--version']).status === 0;
/** `test(name, { skip: CURL_SKIP }, …)`: false in CI (a missing curl then fails the test). */
export const CURL_SKIP: string | false = !HAVE_CURL && !IN_CI ? 'no curl on this machine (CI installs it: .ci/install-curl)' : false;

export interface CurlResult {
  /** curl's exit code. */
  code: number | null;
  /** The HTTP status (`%{http_code}`). */
  status: string;
  /** The answer's body ('' when curl wrote none). */
  body: string;
}

/** Runs `curl -sS -o out -w %{http_code} …args`, with `stdin` on its standard input (curl may stop reading it). */
export function runCurl(args: readonly string[], out: string, stdin?: Buffer): Promise<CurlResult> {
  if (!HAVE_CURL) throw new Error('CI=true and no curl: .ci/install-curl should have installed it');
  return new Promise((resolve, reject) => {
    const child = spawn('curl', ['-sS', '-o', out, '-w', '%{http_code}', ...args], { stdio: [stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'inherit'] });
    let status = '';
    child.stdout!.on('data', (d: Buffer) => (status += d.toString()));
    if (child.stdin !== null) {
      child.stdin.on('error', () => undefined);
      child.stdin.end(stdin);
    }
    child.on('error', reject);
    child.on('close', (code) => {
      let body = '';
      try {
        body = readFileSync(out, 'utf8');
      } catch {
        // no body file: curl failed before writing one
      }
      resolve({ code, status, body });
    });
  });
}
