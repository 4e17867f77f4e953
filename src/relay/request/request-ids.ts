// Request ids (`X-Request-Id`, the access line's `reqId`): a random prefix per thread and a counter,
// cheap and unique across the threads of a gateway and, in practice, across gateways.
import { randomBytes } from 'node:crypto';

export class RequestIds {
  private readonly prefix = randomBytes(6).toString('hex');
  private counter = 0;

  next(): string {
    this.counter += 1;
    return `${this.prefix}-${this.counter.toString(36)}`;
  }
}
