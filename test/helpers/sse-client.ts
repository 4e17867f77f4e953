// A caller of streamed answers for the tests: the answer as it arrived (each chunk with its
// arrival time), whether it ended cleanly, and the blocks of the event stream.
import { request } from 'undici';
import { AUTH } from './gateway.js';

export const WAITING = ': waiting for a replica\n\n';

export interface StreamRead {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** The request id the gateway gave. */
  id: string;
  text: string;
  /** Milliseconds after the request was sent, and the text, of each chunk. */
  chunks: { at: number; text: string }[];
  /** `clean`: the answer ended; `cut`: the connection broke first. */
  ending: 'clean' | 'cut';
}

/** POSTs `body` and reads the whole answer. `onChunk` may stop reading (returning true) to leave. */
export async function readStream(
  url: string,
  body: string,
  headers: Record<string, string> = {},
  onChunk?: (text: string, soFar: string) => boolean,
): Promise<StreamRead> {
  const sent = performance.now();
  const res = await request(url, { method: 'POST', headers: { ...AUTH, 'content-type': 'application/json', ...headers }, body });
  const chunks: { at: number; text: string }[] = [];
  let text = '';
  let ending: 'clean' | 'cut' = 'clean';
  try {
    for await (const chunk of res.body) {
      const piece = (chunk as Buffer).toString();
      text += piece;
      chunks.push({ at: performance.now() - sent, text: piece });
      if (onChunk?.(piece, text) === true) {
        res.body.destroy();
        ending = 'cut';
        break;
      }
    }
  } catch {
    ending = 'cut';
  }
  return { status: res.statusCode, headers: res.headers, id: String(res.headers['x-request-id']), text, chunks, ending };
}

/** The blocks of an event stream (up to each blank line), and what is left after the last. */
export function blocks(text: string): string[] {
  return text.split('\n\n').slice(0, -1);
}

/** The comments Sluice sent while the request waited, and when each arrived. */
export function waitingComments(read: StreamRead): number[] {
  const times: number[] = [];
  let soFar = '';
  let counted = 0;
  for (const chunk of read.chunks) {
    soFar += chunk.text;
    const total = soFar.split(WAITING).length - 1;
    for (; counted < total; counted++) times.push(chunk.at);
  }
  return times;
}

/** The data of the one `event: error` block (parsed), or undefined. */
export function errorEvent(text: string): { error: { code: string; message: string; status?: number } } | undefined {
  const found = blocks(text).filter((b) => b.startsWith('event: error\n'));
  if (found.length === 0) return undefined;
  if (found.length > 1) throw new Error(`more than one error event in ${JSON.stringify(text)}`);
  const data = found[0]!.split('\n').filter((line) => line.startsWith('data: '));
  if (data.length !== 1) throw new Error(`an error event with ${data.length} data lines: ${JSON.stringify(found[0])}`);
  return JSON.parse(data[0]!.slice(6)) as { error: { code: string; message: string; status?: number } };
}
