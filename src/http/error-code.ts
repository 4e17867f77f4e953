// A failure's short name for logs and /status, one rule for every caller: a probe's detail
// (`ECONNREFUSED`), a load reading's problem, the `code` of an access line's `err`.

/** How deep `cause` is followed (a cycle or a very long chain ends here). */
const MAX_CAUSES = 8;

/**
 * The error's string `code` (`ECONNREFUSED`, `ERR_INVALID_URL`, `UPSTREAM_CLOSED`), else the first
 * one along its `cause` chain (an error that wraps a socket's error), else the error's `name`
 * (`TypeError`), else `error`. Never a message: messages are long and may name a host or a path.
 */
export function errorCode(err: unknown): string {
  let e = err;
  for (let depth = 0; depth <= MAX_CAUSES && typeof e === 'object' && e !== null; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    const cause = (e as { cause?: unknown }).cause;
    if (cause === undefined || cause === e) break;
    e = cause;
  }
  if (err instanceof Error) return err.name;
  return 'error';
}
