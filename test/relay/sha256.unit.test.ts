// The bearer check's SHA-256 (src/relay/request/sha256.ts) against node:crypto, and `authenticate` over
// several tokens: every length across the block and padding boundaries, random texts from a
// seed, and the comparisons that must and must not match.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, test } from 'node:test';
import { authenticate, tokenEntries } from '../../src/relay/request/auth.js';
import { digestWords, sameDigest, sha256Ascii } from '../../src/relay/request/sha256.js';

const B64TOKEN = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/';

/** A small deterministic generator (mulberry32), so a failure names its seed. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const hex = (words: Int32Array): string => Buffer.from(new Uint8Array(words.length * 4).map((_, i) => (words[i >> 2]! >>> (24 - 8 * (i & 3))) & 255)).toString('hex');
const expected = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');

describe('sha256Ascii', () => {
  test('the FIPS 180-4 examples', () => {
    assert.equal(hex(sha256Ascii('')), 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    assert.equal(hex(sha256Ascii('abc')), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    assert.equal(
      hex(sha256Ascii('abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq')),
      '248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1',
    );
  });

  test('every length from 0 to 300 (one, two and more blocks; the 55/56 and 63/64 padding edges)', () => {
    for (let n = 0; n <= 300; n++) {
      const text = Array.from({ length: n }, (_, i) => B64TOKEN[(i * 7 + n) % B64TOKEN.length]).join('');
      assert.equal(hex(sha256Ascii(text)), expected(text), `length ${n}`);
    }
  });

  test('2,000 random ASCII texts, every code from 0 to 127', () => {
    const seed = Number(process.env['SHA_SEED'] ?? 20261122);
    const next = random(seed);
    for (let k = 0; k < 2_000; k++) {
      const n = Math.floor(next() * 200);
      const text = String.fromCharCode(...Array.from({ length: n }, () => Math.floor(next() * 128)));
      assert.equal(hex(sha256Ascii(text)), expected(text), `seed ${seed}, text ${k} (length ${n})`);
    }
  });

  test('sameDigest compares all eight words; digestWords takes exactly 32 bytes', () => {
    const words = digestWords(createHash('sha256').update('token').digest());
    assert.ok(sameDigest(sha256Ascii('token'), words));
    assert.ok(!sameDigest(sha256Ascii('tokeN'), words));
    for (let i = 0; i < 8; i++) {
      const other = Int32Array.from(words);
      other[i] = other[i]! ^ (1 << (i * 3));
      assert.ok(!sameDigest(other, words), `a difference in word ${i}`);
    }
    assert.throws(() => digestWords(Buffer.alloc(31)), RangeError);
  });
});

describe('authenticate over several tokens', () => {
  const tokens = tokenEntries(
    ['alpha-token', 'beta-token', 'gamma/token+=='].map((token, i) => ({
      name: `t${i}`,
      sha256: createHash('sha256').update(token, 'utf8').digest('hex'),
      priority: 0,
    })),
  );

  test('each token is recognised by its own name, whatever its place in the list', () => {
    assert.equal((authenticate('Bearer alpha-token', tokens) as { name: string }).name, 't0');
    assert.equal((authenticate('bearer   beta-token', tokens) as { name: string }).name, 't1');
    assert.equal((authenticate('BEARER gamma/token+==', tokens) as { name: string }).name, 't2');
  });

  test('anything else is invalid, missing or malformed', () => {
    assert.equal(authenticate('Bearer alpha-tokem', tokens), 'invalid');
    assert.equal(authenticate('Bearer alpha-token-', tokens), 'invalid');
    assert.equal(authenticate('Bearer ' + 'a'.repeat(5_000), tokens), 'invalid');
    assert.equal(authenticate(undefined, tokens), 'missing');
    assert.equal(authenticate('', tokens), 'missing');
    assert.equal(authenticate('Basic YWxhZGRpbjpvcGVuc2VzYW1l', tokens), 'malformed');
    assert.equal(authenticate('Bearer alpha token', tokens), 'malformed');
    assert.equal(authenticate('Bearer tokén', tokens), 'malformed');
    assert.equal(authenticate('Bearer alpha-token', []), 'invalid');
  });
});
