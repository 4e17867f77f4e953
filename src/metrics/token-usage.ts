// LLM token usage by service and token (`sluice_llm_tokens_total`), in a region of each thread's
// counter store (request-counters.ts): one writer thread per store, the stores summed at a scrape.
//
// Tokens are reloaded with SIGHUP, so unlike the services their places cannot be fixed at start:
// each store has, per service, TOKEN_SLOTS places, each with a token's name (UTF-8, at most
// TOKEN_NAME_BYTES) and its prompt and completion counts. The writing thread takes a place when it
// builds its token table (at start and at each reload, never per request: a request adds to the
// place its token was given), writing the name before publishing its length with Atomics.store;
// the reader sums the stores by name. A place is never given back: a token removed or renamed
// keeps its counts (as a counter does) until the process restarts. A token that finds no place
// (TOKEN_SLOTS names in its service already, or a longer name) counts under OTHER_TOKEN.
//
// A router's tokens count under the router's slug (docs/operations.md#llm-token-usage), in a block
// like a service's. Routers come and go with SIGHUP too, so after the services' blocks a store has
// `routers` blocks that a router takes by its slug, the same way (slug, then its length), when its
// tokens are placed: the routers of the start config and ROUTER_USAGE_SPARE more. A router that
// finds no block (more routers added by reloads than that) counts nothing until the restart.

/** Token names kept per service and store. */
export const TOKEN_SLOTS = 64;
/** The longest token name (UTF-8 bytes) that has a place of its own. */
export const TOKEN_NAME_BYTES = 124;
/** The `token` label of the usage of tokens without a place. */
export const OTHER_TOKEN = '(other)';

/** Router blocks beyond the routers of the start config: for routers that reloads add. */
const ROUTER_USAGE_SPARE = 4;

const NAME_SLOT_BYTES = TOKEN_NAME_BYTES + 4;
/** Per block (a service or a router): prompt and completion for every place, then for OTHER_TOKEN. */
const SERVICE_F64 = (TOKEN_SLOTS + 1) * 2;
/** A router block's slug (at most 63 ASCII characters) and its length. */
const SLUG_SLOT_BYTES = 72;

/** The router blocks of the stores of a gateway that starts with `routers` routers. */
export function routerUsageBlocks(routers: number): number {
  return routers + ROUTER_USAGE_SPARE;
}

/** Bytes the region needs for `services` services and `routers` router blocks (a multiple of 8). */
export function tokenUsageBytes(services: number, routers: number): number {
  return (services + routers) * (SERVICE_F64 * 8 + TOKEN_SLOTS * NAME_SLOT_BYTES) + routers * SLUG_SLOT_BYTES;
}

export class TokenUsage {
  private readonly f64: Float64Array;
  /** The names' lengths (0: a free place), one int32 at the start of each name slot. */
  private readonly lengths: Int32Array;
  private readonly names: Buffer;
  /** The router blocks' slugs' lengths (0: a free block), one int32 at the start of each slug slot. */
  private readonly slugLengths: Int32Array;
  private readonly slugs: Buffer;
  private readonly blocks: number;

  constructor(
    buffer: ArrayBuffer | SharedArrayBuffer,
    /** Where the region starts (a multiple of 8). */
    offset: number,
    private readonly services: number,
    private readonly routers: number,
  ) {
    this.blocks = services + routers;
    this.f64 = new Float64Array(buffer, offset, this.blocks * SERVICE_F64);
    const namesAt = offset + this.blocks * SERVICE_F64 * 8;
    const namesBytes = this.blocks * TOKEN_SLOTS * NAME_SLOT_BYTES;
    this.lengths = new Int32Array(buffer, namesAt, namesBytes / 4);
    this.names = Buffer.from(buffer, namesAt, namesBytes);
    this.slugLengths = new Int32Array(buffer, namesAt + namesBytes, (routers * SLUG_SLOT_BYTES) / 4);
    this.slugs = Buffer.from(buffer, namesAt + namesBytes, routers * SLUG_SLOT_BYTES);
  }

  /**
   * The writing thread: the block of the router `slug` (what `place` takes for its tokens), taken
   * if new; -1 when every router block is another router's.
   */
  routerBlock(slug: string): number {
    const encoded = Buffer.from(slug, 'utf8');
    if (encoded.length === 0 || encoded.length > SLUG_SLOT_BYTES - 4) return -1;
    for (let router = 0; router < this.routers; router++) {
      const at = router * SLUG_SLOT_BYTES;
      const length = Atomics.load(this.slugLengths, at / 4);
      if (length === 0) {
        encoded.copy(this.slugs, at + 4);
        Atomics.store(this.slugLengths, at / 4, encoded.length);
        return this.services + router;
      }
      if (length === encoded.length && this.slugs.compare(encoded, 0, length, at + 4, at + 4 + length) === 0) return this.services + router;
    }
    return -1;
  }

  /**
   * The writing thread: the place of the token `name` in the block at `service` (a service's
   * index, or a router's block), taken if new (what `add` takes); -1 for no block.
   */
  place(service: number, name: string): number {
    if (service < 0) return -1;
    const base = service * SERVICE_F64;
    const encoded = Buffer.from(name, 'utf8');
    if (encoded.length === 0 || encoded.length > TOKEN_NAME_BYTES) return base + TOKEN_SLOTS * 2;
    for (let slot = 0; slot < TOKEN_SLOTS; slot++) {
      const at = (service * TOKEN_SLOTS + slot) * NAME_SLOT_BYTES;
      const length = Atomics.load(this.lengths, at / 4);
      if (length === 0) {
        // The name first, then its length: a reader that sees the length sees the name.
        encoded.copy(this.names, at + 4);
        Atomics.store(this.lengths, at / 4, encoded.length);
        return base + slot * 2;
      }
      if (length === encoded.length && this.names.compare(encoded, 0, length, at + 4, at + 4 + length) === 0) return base + slot * 2;
    }
    return base + TOKEN_SLOTS * 2;
  }

  /** The hot path: a finished request's usage, at its token's `place` (negative: none). */
  add(place: number, prompt: number, completion: number): void {
    if (place < 0) return;
    const f64 = this.f64;
    f64[place]! += prompt;
    f64[place + 1]! += completion;
  }

  /** At a scrape: each router block taken in this store, its slug and block (what `forEach` reads). */
  forEachRouter(visit: (slug: string, block: number) => void): void {
    for (let router = 0; router < this.routers; router++) {
      const at = router * SLUG_SLOT_BYTES;
      const length = Atomics.load(this.slugLengths, at / 4);
      if (length === 0) break;
      visit(this.slugs.toString('utf8', at + 4, at + 4 + length), this.services + router);
    }
  }

  /** At a scrape: every named place of the block (a service's, or a router's), then OTHER_TOKEN if it counted anything. */
  forEach(service: number, add: (token: string, prompt: number, completion: number) => void): void {
    if (service < 0 || service >= this.blocks) return;
    const base = service * SERVICE_F64;
    for (let slot = 0; slot < TOKEN_SLOTS; slot++) {
      const at = (service * TOKEN_SLOTS + slot) * NAME_SLOT_BYTES;
      const length = Atomics.load(this.lengths, at / 4);
      if (length === 0) break;
      add(this.names.toString('utf8', at + 4, at + 4 + length), this.f64[base + slot * 2]!, this.f64[base + slot * 2 + 1]!);
    }
    const prompt = this.f64[base + TOKEN_SLOTS * 2]!;
    const completion = this.f64[base + TOKEN_SLOTS * 2 + 1]!;
    if (prompt > 0 || completion > 0) add(OTHER_TOKEN, prompt, completion);
  }
}
