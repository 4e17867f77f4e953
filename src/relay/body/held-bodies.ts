// The memory a service's request bodies take while they wait on one front-end thread: the bytes a
// caller sent that are not yet written to a replica's connection, whether the request waits in the
// queue, waits for a connection, or is a chunked upload held until it ends
// (docs/configuration.md#chunked-uploads). One account per service and thread; caller-body.ts is
// its only writer. Only the hold is refused by it: queued and streamed bodies have their own
// per-request high-water marks and count here so that holds leave room for them.
import type { ServiceConfig } from '../../config/types.js';
import { HOLD_HIGH_WATER } from '../../tunables.js';

export class HeldBodies {
  /** Bytes held now. */
  bytes = 0;
  /** A chunked body is held up to this many bytes (`uploads.bufferBytes`; 0: never). */
  readonly bufferBytes: number;
  /**
   * A hold that would take the account past this streams on instead, as a body past its bound:
   * what the queue's bodies may take (`queue.maxRequests` × HOLD_HIGH_WATER), and at least one
   * whole hold.
   */
  readonly maxBytes: number;

  constructor(
    config: { uploads: Pick<ServiceConfig['uploads'], 'bufferBytes'>; queue: Pick<ServiceConfig['queue'], 'maxRequests'> },
    /** Every body is held, whatever its framing: a router's, until it finds the `"model"` (model-router.ts). */
    readonly holdsEvery = false,
  ) {
    this.bufferBytes = config.uploads.bufferBytes;
    this.maxBytes = Math.max(config.queue.maxRequests * HOLD_HIGH_WATER, this.bufferBytes);
  }
}
