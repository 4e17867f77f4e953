// `node dist/bench/micro/prefix-routing.js`: µs per request that prefix-aware routing adds on the
// relay, for a 1 KiB chat and a 200 KiB prompt, with the policy on and off. "on" is all of it: the
// body walk with the prompt hashed as it passes (body-fields.ts, prompt-blocks.ts), the chain, the
// pick over three ready replicas' indexes (slots.ts `takePrefix`), recording the blocks
// (prefix-index.ts) and giving the room back. "off" is a plain service's choice (`take`, no body
// walk), and "walk only" the body walk a router or a limited token pays anyway. Variants are
// interleaved round by round; each reports the median of its rounds.
import { BodyFields } from '../../src/relay/body/body-fields.js';
import { PromptBlocks } from '../../src/relay/body/prompt-blocks.js';
import { SlotControl } from '../../src/replicas/slot-control.js';
import { READY, SlotTable } from '../../src/replicas/slots.js';
import { report, type Timing, time } from './timing.js';

const SYSTEM = 'You are a careful assistant for the support team of a large company. Answer briefly. ';

function chatBody(bytes: number, user: number): Uint8Array {
  const messages = [
    { role: 'system', content: SYSTEM.repeat(Math.max(1, Math.floor((bytes - 200) / SYSTEM.length))) },
    { role: 'user', content: `question ${user}` },
  ];
  return Buffer.from(JSON.stringify({ model: 'llama-3-8b', messages, max_tokens: 200, stream: true }));
}

function table(): { slots: SlotTable; known: Int32Array } {
  const control = SlotControl.create(3, 1, 0, false, 8192);
  const slots = new SlotTable(control.init);
  const known = new Int32Array(3);
  for (let i = 0; i < 3; i++) {
    control.claim();
    control.setState(i, READY);
    known[i] = control.gen(i);
  }
  return { slots, known };
}

async function main(): Promise<void> {
  const out: Timing[] = [];
  for (const [label, bytes, n] of [['1 KiB chat', 1024, 20_000], ['200 KiB prompt', 200 * 1024, 300]] as const) {
    const bodies = Array.from({ length: 16 }, (_, i) => chatBody(bytes, i));
    const { slots, known } = table();
    const variants: [string, (i: number) => void][] = [
      [
        `${label}: off (take)`,
        () => {
          const s = slots.take(0, known, -1, false);
          slots.release(0, s);
        },
      ],
      [
        `${label}: walk only (a router's)`,
        (i) => {
          const f = new BodyFields();
          f.feed(bodies[i & 15]!);
          f.model(true);
          const s = slots.take(0, known, -1, false);
          slots.release(0, s);
        },
      ],
      [
        `${label}: on (walk + hash + pick + record)`,
        (i) => {
          const f = new BodyFields(new PromptBlocks(256, 64));
          f.feed(bodies[i & 15]!);
          const hashes = f.promptBlocks()!;
          const s = slots.takePrefix(0, known, hashes, 1.25, false);
          slots.prefix!.record(s, hashes);
          slots.release(0, s);
        },
      ],
    ];
    const per = new Map<string, Timing[]>();
    for (let round = 0; round < 5; round++) {
      for (const [name, fn] of variants) {
        const t = await time(name, n, fn, 3);
        (per.get(name) ?? per.set(name, []).get(name)!).push(t);
      }
    }
    for (const [name, list] of per) {
      const sorted = list.map((t) => t.us).sort((a, b) => a - b);
      out.push({ name, us: sorted[Math.floor(sorted.length / 2)]!, minUs: Math.min(...list.map((t) => t.minUs)) });
    }
  }
  report(out);
}

await main();
