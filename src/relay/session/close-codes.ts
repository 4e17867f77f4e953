// The close codes of a realtime session (RFC 6455 section 7.4): the ones Sluice sends, and how a
// close from one side becomes the close the other side gets.
//   1001 — the gateway is draining (the replica gets 1001 too when Sluice ends a session)
//   1008 — a policy or limit ended the session: its idle or total time-out, a replica not reading
//   1009 — the caller sent a message larger than `sessions.maxMessageBytes`
//   1011 — the replica failed: its connection ended without a close frame, or it said 1011
//   1012 — the replica went away (it closed with 1001)
// Any other code a side sends reaches the other as it is.

export const SESSION_CLOSE = {
  normal: 1000,
  goingAway: 1001,
  policy: 1008,
  tooBig: 1009,
  replicaFailed: 1011,
  replicaGone: 1012,
} as const;

/** What the caller gets when the replica's side closed. */
export interface SessionClose {
  readonly code: number;
  readonly reason: string;
  /** The replica failed (not an orderly close): the session's outcome is `upstream_error`. */
  readonly failed: boolean;
}

/** RFC 6455 section 7.4: the codes an endpoint may send in a close frame (1004–1006 and 1015 never are). */
function sendable(code: number): boolean {
  return (code >= 1000 && code <= 1014 && code !== 1004 && code !== 1005 && code !== 1006) || (code >= 3000 && code <= 4999);
}

/** The close the caller gets for the replica's `code` (as the `ws` client reports it: 1005 for a close frame without a code, 1006 without a close frame). */
export function closeCodeFromReplica(code: number, reason: string): SessionClose {
  if (code === 1005) return { code: SESSION_CLOSE.normal, reason, failed: false };
  if (code === SESSION_CLOSE.goingAway) return { code: SESSION_CLOSE.replicaGone, reason: reason === '' ? 'the replica went away' : reason, failed: false };
  if (code === SESSION_CLOSE.replicaFailed || !sendable(code)) return { code: SESSION_CLOSE.replicaFailed, reason: reason === '' ? 'the replica failed' : reason, failed: true };
  return { code, reason, failed: false };
}

/** The code the replica gets for the caller's close `code` (as uWS reports it); undefined: the caller left without a close frame. */
export function forwardableClose(code: number): number | undefined {
  if (code === 1005) return SESSION_CLOSE.normal;
  return sendable(code) ? code : undefined;
}
