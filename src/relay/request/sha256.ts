// SHA-256 (FIPS 180-4) of an ASCII string, in JavaScript, for the bearer check on every request.
//
// Why not `crypto.hash`: a one-shot OpenSSL digest costs about 1 µs for a 40-character token in a
// tight loop and 2–3 µs on the request path (the EVP context set-up, the string's UTF-8 copy, the
// result Buffer), against about 0.5 µs here, and the result stays in an Int32Array that
// `sameDigest` compares without a Buffer or a call into C++. Tested against `node:crypto` for
// every length from 0 to 300 and random texts (test/relay/sha256.unit.test.ts).
//
// Timing: the work depends on the text's length only (one 64-byte block per 64 characters,
// plus padding), never on its content: no branch and no table index depends on a character,
// as in OpenSSL's own code. The digest comparison runs over all eight words.

const K = new Int32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01,
  0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc,
  0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
  0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08,
  0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
  0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);
const IV = new Int32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);

/** The message schedule of the block being compressed (its first 16 words are the block). */
const W = new Int32Array(64);
/** The hash state; after `sha256Ascii`, the digest as eight big-endian words. */
const H = new Int32Array(8);

/**
 * The SHA-256 digest of `text`, whose characters must all be below U+0080 (the caller checks:
 * for ASCII the UTF-8 bytes are the character codes). Returns this module's state array: valid
 * until the next call, to be compared (`sameDigest`) or copied, never kept.
 */
export function sha256Ascii(text: string): Int32Array {
  H.set(IV);
  const n = text.length;
  let p = 0;
  // Every full 64-character block, then the last partial one with the padding: 0x80, zeros, and
  // the length in bits in the last 8 bytes (in a block of its own if fewer than 9 bytes are left).
  for (;;) {
    W.fill(0, 0, 16);
    let k = 0;
    for (; k < 64 && p < n; k++, p++) W[k >> 2] = W[k >> 2]! | (text.charCodeAt(p) << (24 - 8 * (k & 3)));
    if (k === 64) {
      compress();
      continue;
    }
    W[k >> 2] = W[k >> 2]! | (0x80 << (24 - 8 * (k & 3)));
    if (k >= 56) {
      compress();
      W.fill(0, 0, 16);
    }
    W[14] = Math.floor(n / 0x20000000);
    W[15] = n << 3;
    compress();
    return H;
  }
}

/** True when `digest` (from `sha256Ascii`) equals `expected`; every word is compared, whatever differs. */
export function sameDigest(digest: Int32Array, expected: Int32Array): boolean {
  let diff = 0;
  for (let i = 0; i < 8; i++) diff |= digest[i]! ^ expected[i]!;
  return diff === 0;
}

/** A 32-byte digest (a config token's `sha256`, decoded) as the eight words `sha256Ascii` gives. */
export function digestWords(digest: Buffer): Int32Array {
  if (digest.length !== 32) throw new RangeError(`a SHA-256 digest has 32 bytes, not ${digest.length}`);
  const words = new Int32Array(8);
  for (let i = 0; i < 8; i++) words[i] = digest.readInt32BE(i * 4);
  return words;
}

function compress(): void {
  for (let t = 16; t < 64; t++) {
    const x = W[t - 15]!;
    const y = W[t - 2]!;
    const s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3);
    const s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10);
    W[t] = (W[t - 16]! + s0 + W[t - 7]! + s1) | 0;
  }
  let a = H[0]!;
  let b = H[1]!;
  let c = H[2]!;
  let d = H[3]!;
  let e = H[4]!;
  let f = H[5]!;
  let g = H[6]!;
  let h = H[7]!;
  for (let t = 0; t < 64; t++) {
    const s1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
    const ch = (e & f) ^ (~e & g);
    const t1 = (h + s1 + ch + K[t]! + W[t]!) | 0;
    const s0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
    const maj = (a & b) ^ (a & c) ^ (b & c);
    h = g;
    g = f;
    f = e;
    e = (d + t1) | 0;
    d = c;
    c = b;
    b = a;
    a = (t1 + s0 + maj) | 0;
  }
  H[0] = (H[0]! + a) | 0;
  H[1] = (H[1]! + b) | 0;
  H[2] = (H[2]! + c) | 0;
  H[3] = (H[3]! + d) | 0;
  H[4] = (H[4]! + e) | 0;
  H[5] = (H[5]! + f) | 0;
  H[6] = (H[6]! + g) | 0;
  H[7] = (H[7]! + h) | 0;
}
