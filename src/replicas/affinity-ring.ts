// The hash ring of session affinity (`routing.affinityHeader`): consistent hashing, with the
// bounded loads of Mirrokni, Thorup and Zadimoghaddam ("Consistent Hashing with Bounded Loads",
// 2018) applied by the slot table when it walks the ring (slots.ts `takeNear`).
//
// - Each replica owns POINTS_PER_REPLICA points, hashed from its origin (`http://10.0.0.5:8000`),
//   not from its slot or id: every gateway in front of the same replicas builds the same ring, so
//   a session goes to the same replica whichever gateway it reaches.
// - A session's value hashes to a point on the ring; its replica is the owner of the first point
//   at or after it. A replica joining takes over only the arcs before its own points; one leaving
//   (or out of rotation) hands only its arcs to the next owners: no other session moves.
// - The ring holds every replica a thread knows of (announced, until gone), ready or not: the walk
//   skips those not ready, so a replica going in and out of rotation costs no rebuild. Each thread
//   rebuilds its ring when it hears of a replica or of one gone, never per request.
// - The hash is FNV-1a over the value's UTF-16 code units, finished with MurmurHash3's 32-bit mixer
//   (FNV-1a alone spreads short, similar strings like `replica#1`, `replica#2` poorly). No
//   allocation, no string copy.
import { POINTS_PER_REPLICA } from '../tunables.js';

/** A request without an affinity value. */
export const NO_AFFINITY = -1;

/** A 32-bit hash of `text` (0 to 2^32 - 1). */
export function hashKey(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

export class AffinityRing {
  /** Slot → origin of the replica in it. */
  private readonly members = new Map<number, string>();
  /** Point hashes, ascending, and the slot owning each. */
  points = new Uint32Array(0);
  owners = new Int32Array(0);

  get replicas(): number {
    return this.members.size;
  }

  /** The replica in `slot` is at `origin` (a new one, or the same again: then nothing changes). */
  set(slot: number, origin: string): void {
    if (this.members.get(slot) === origin) return;
    this.members.set(slot, origin);
    this.rebuild();
  }

  delete(slot: number): void {
    if (this.members.delete(slot)) this.rebuild();
  }

  /** The index of the first point at or after `hash`, wrapping to 0 past the last. */
  first(hash: number): number {
    const points = this.points;
    let lo = 0;
    let hi = points.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (points[mid]! < hash) lo = mid + 1;
      else hi = mid;
    }
    return lo === points.length ? 0 : lo;
  }

  private rebuild(): void {
    const all: { hash: number; slot: number; origin: string }[] = [];
    for (const [slot, origin] of this.members) {
      for (let i = 0; i < POINTS_PER_REPLICA; i++) all.push({ hash: hashKey(`${origin}#${i}`), slot, origin });
    }
    // Equal hashes (rare) are ordered by origin, the same on every gateway.
    all.sort((a, b) => a.hash - b.hash || (a.origin < b.origin ? -1 : a.origin > b.origin ? 1 : 0));
    this.points = Uint32Array.from(all, (p) => p.hash);
    this.owners = Int32Array.from(all, (p) => p.slot);
  }
}
