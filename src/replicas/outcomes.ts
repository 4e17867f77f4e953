// How a request ended for its replica, as both planes name it: the data plane reports it when it
// gives the replica back (relay/replica-set.ts), the control plane counts failures toward an
// ejection (control/service/ejections.ts) and the metrics name them.

/**
 * How a request ended for the replica:
 * - `ok`: the replica answered (any status line, even if the caller went away meanwhile);
 * - `unanswered`: over before the replica could answer, through no fault of its own (the caller
 *   left, the body was too large, the replica was being stopped);
 * - `unreachable`: connection refused or reset before any byte of the request was sent;
 * - `reset`: the connection closed or was reset after the request was sent, before a status line;
 * - `timeout`: no status line within `timeouts.responseHeadersMs`;
 * - `failed`: any other failure of the replica (after its status line, or a malformed answer).
 * `unreachable`, `reset` and `timeout` are consecutive failures that may eject the replica
 * (src/control/service/ejections.ts); `ok` ends the count.
 */
export type ReleaseOutcome = 'ok' | 'unanswered' | 'unreachable' | 'reset' | 'timeout' | 'failed';

/** The outcomes that count toward ejecting a replica, as the ejection's `reason` names them. */
export type FailureReason = 'refused' | 'reset' | 'timeout';
