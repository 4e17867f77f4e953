// The request head as a whole, checked before routing (RFC 9112): framing, header syntax, the
// method token and the raw target. A request that fails here cannot be framed or read safely, so
// it is refused whatever its route, and the connection closes after the answer.
import { RelayError } from '../../http/errors.js';
import { TOKEN } from '../../http/syntax.js';
import { type CallerHeaders, headerProblem, requestFraming } from './headers.js';
import { targetProblem } from './path.js';


/**
 * The request's framing (body bytes, -1 for chunked, 0 for none, as `requestFraming`), or the
 * error that refuses it. Allocates nothing for a sound request.
 */
export function checkRequestHead(headers: CallerHeaders, method: string, url: string, query: string | undefined): number | RelayError {
  const framing = requestFraming(headers);
  if (typeof framing === 'string') return new RelayError('bad_request', { message: `Invalid request framing: ${framing}.` });
  const malformed = headerProblem(headers);
  if (malformed !== undefined) return new RelayError('bad_request', { message: `Malformed request: ${malformed}.` });
  if (method !== 'POST' && !TOKEN.test(method)) return new RelayError('bad_request', { message: 'Malformed request: the method is not a token.' });
  const target = targetProblem(url, query);
  if (target !== undefined) return new RelayError('invalid_path', { message: `The request path is not allowed: ${target}.` });
  return framing;
}
