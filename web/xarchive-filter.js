// xarchive-filter.js: reads the filters that xarchive domains publish
// (docs/FORMAT.md) and answers "might this domain hold archive ID X?"
// exactly as the Rust library (crates/filter) does.
//
// An ES module without dependencies, for browsers and Node.js (>= 18).
//
//   import { decodeFilter, syncFilter } from './xarchive-filter.js';
//   const { filter } = await syncFilter('http://127.0.0.1:7701', null);
//   filter.mightContain('J001-WS·2023-Y-0001'); // false: certainly not held
//
// - XABL (Bloom bit view, what counting domains publish), XACB (a counting
//   filter, read as its bit view) and XACK (cuckoo filter) are read; XADL
//   deltas (from /v1/filter/delta) are applied to a filter in place.
// - Every input is checked as the Rust reader checks it (length, magic,
//   format version, CRC32C, reserved bytes, geometry, exact body length):
//   bad bytes throw a FilterFormatError, never a wrong answer.
// - 64-bit quantities (hashes, epoch, version, item counts) are BigInt.

const M64 = (1n << 64n) - 1n;
const C1 = 0x87c37b91114253d5n;
const C2 = 0x4cf5ad432745937fn;
const GOLDEN = 0x9e3779b97f4a7c15n;

/** The only format version that exists. */
export const FORMAT_VERSION = 1;
/** Bloom positions per block: all k probes of an ID fall in one block. */
export const BLOCK_BITS = 512;
/** Most Bloom bits (or counters, or delta cells). */
export const MAX_BITS = 2 ** 38;
/** Most probes per ID. */
export const MAX_K = 32;
/** Most cuckoo buckets. */
export const MAX_BUCKETS = 2 ** 34;

const KINDS = {
  XABL: 'Bloom filter',
  XACB: 'counting Bloom filter',
  XACK: 'cuckoo filter',
  XADL: 'filter delta',
};

/**
 * Bytes that are not a valid serialized filter or delta. `kind` names the
 * check that failed, as the Rust `DecodeError` variant does: 'truncated',
 * 'magic', 'version', 'checksum', 'geometry', 'length' or 'invalid'.
 */
export class FilterFormatError extends Error {
  constructor(kind, message) {
    super(message);
    this.name = 'FilterFormatError';
    this.kind = kind;
  }
}

/**
 * A delta that does not fit the filter it was applied to (nothing was
 * changed). `kind`: 'geometry', 'epoch', 'version' or 'cell', as the Rust
 * `ApplyError`. 'epoch' means the domain rebuilt its filter: take a snapshot.
 */
export class DeltaApplyError extends Error {
  constructor(kind, message) {
    super(message);
    this.name = 'DeltaApplyError';
    this.kind = kind;
  }
}

// ---------------------------------------------------------------- bytes

const encoder = new TextEncoder();

/**
 * The UTF-8 bytes that are hashed for an ID: a string is encoded as UTF-8
 * (it must be well-formed Unicode: a lone surrogate has no UTF-8 form and
 * cannot be an archive ID), a Uint8Array is taken as it is.
 */
export function idBytes(id) {
  if (id instanceof Uint8Array) return id;
  if (typeof id !== 'string') {
    throw new TypeError(`an archive ID is a string or a Uint8Array, not ${typeof id}`);
  }
  if (!isWellFormed(id)) {
    throw new TypeError('archive ID contains a lone surrogate (it is not valid Unicode)');
  }
  return encoder.encode(id);
}

function isWellFormed(s) {
  if (typeof s.isWellFormed === 'function') return s.isWellFormed();
  return !/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(s);
}

function asBytes(input) {
  if (input instanceof Uint8Array) return input;
  if (input instanceof ArrayBuffer) return new Uint8Array(input);
  if (ArrayBuffer.isView(input)) {
    return new Uint8Array(input.buffer, input.byteOffset, input.byteLength);
  }
  throw new TypeError('expected bytes (Uint8Array or ArrayBuffer)');
}

// ---------------------------------------------------------------- CRC32C

const CRC_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

/** CRC-32C (Castagnoli) of `bytes[start..end)`, as an unsigned number. */
export function crc32c(bytes, start = 0, end = bytes.length) {
  let crc = 0xffffffff;
  for (let i = start; i < end; i++) crc = CRC_TABLE[(crc ^ bytes[i]) & 0xff] ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

// ---------------------------------------------------------------- hashing

function rotl64(x, r) {
  return ((x << BigInt(r)) | (x >> BigInt(64 - r))) & M64;
}

function mixK1(k1) {
  return (rotl64((k1 * C1) & M64, 31) * C2) & M64;
}

function mixK2(k2) {
  return (rotl64((k2 * C2) & M64, 33) * C1) & M64;
}

function fmix64(k) {
  k ^= k >> 33n;
  k = (k * 0xff51afd7ed558ccdn) & M64;
  k ^= k >> 33n;
  k = (k * 0xc4ceb9fe1a85ec53n) & M64;
  k ^= k >> 33n;
  return k;
}

/**
 * MurmurHash3 x64_128 (Austin Appleby's reference) of an ID's UTF-8 bytes
 * (or of raw bytes) with a 32-bit seed: `{ h1, h2 }` as unsigned BigInts.
 */
export function murmur3_x64_128(data, seed = 0) {
  const bytes = idBytes(data);
  if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) {
    throw new RangeError(`seed must be a 32-bit unsigned integer, got ${seed}`);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const len = bytes.length;
  const blocks = Math.floor(len / 16);
  let h1 = BigInt(seed);
  let h2 = BigInt(seed);
  for (let i = 0; i < blocks; i++) {
    const k1 = view.getBigUint64(i * 16, true);
    const k2 = view.getBigUint64(i * 16 + 8, true);
    h1 ^= mixK1(k1);
    h1 = ((rotl64(h1, 27) + h2) * 5n + 0x52dce729n) & M64;
    h2 ^= mixK2(k2);
    h2 = ((rotl64(h2, 31) + h1) * 5n + 0x38495ab5n) & M64;
  }
  const tail = len % 16;
  if (tail > 0) {
    const base = blocks * 16;
    let k1 = 0n;
    let k2 = 0n;
    for (let i = Math.min(tail, 8) - 1; i >= 0; i--) k1 = (k1 << 8n) | BigInt(bytes[base + i]);
    for (let i = tail - 1; i >= 8; i--) k2 = (k2 << 8n) | BigInt(bytes[base + i]);
    if (tail > 8) h2 ^= mixK2(k2);
    h1 ^= mixK1(k1);
  }
  h1 ^= BigInt(len);
  h2 ^= BigInt(len);
  h1 = (h1 + h2) & M64;
  h2 = (h2 + h1) & M64;
  h1 = fmix64(h1);
  h2 = fmix64(h2);
  h1 = (h1 + h2) & M64;
  h2 = (h2 + h1) & M64;
  return { h1, h2 };
}

/** floor(x * n / 2^64) for a u64 x and a non-negative integer n, as a Number. */
function fastRange(x, n) {
  return Number((x * BigInt(n)) >> 64n);
}

/**
 * The k probe positions of an ID in a Bloom geometry, in probe order
 * (docs/FORMAT.md, "Bloom probe positions"). `digest` may be passed when
 * already computed with the same seed.
 */
export function bloomPositions(id, numBits, k, seed, digest = murmur3_x64_128(id, seed)) {
  const { h1, h2 } = digest;
  const base = fastRange(h1, numBits / BLOCK_BITS) * BLOCK_BITS;
  const step = rotl64(h1, 32);
  const out = new Array(k);
  let word = h2;
  for (let i = 0; i < k; i++) {
    const field = i % 7;
    if (i > 0 && field === 0) word = (word + step) & M64;
    out[i] = base + Number((word >> BigInt(9 * field)) & 511n);
  }
  return out;
}

/**
 * Home bucket, fingerprint and alternate bucket of an ID in a cuckoo
 * geometry (docs/FORMAT.md, "Cuckoo bucket and fingerprint").
 */
export function cuckooLocation(id, numBuckets, fingerprintBits, seed, digest = murmur3_x64_128(id, seed)) {
  const { h1, h2 } = digest;
  const bucket = fastRange(h1, numBuckets);
  const fingerprint = fastRange(h2, 2 ** fingerprintBits - 1) + 1;
  return { bucket, fingerprint, alternate: cuckooAlternate(bucket, fingerprint, numBuckets) };
}

function cuckooAlternate(i, fingerprint, numBuckets) {
  const h = fastRange((BigInt(fingerprint) * GOLDEN) & M64, numBuckets);
  return h >= i ? h - i : h + numBuckets - i;
}

// ---------------------------------------------------------------- envelope

class Reader {
  constructor(bytes, start, end) {
    this.bytes = bytes;
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.at = start;
    this.end = end;
  }

  remaining() {
    return this.end - this.at;
  }

  take(n) {
    if (n > this.remaining()) {
      throw new FilterFormatError(
        'truncated',
        `input ends early: ${n} bytes needed, ${this.remaining()} available`,
      );
    }
    const start = this.at;
    this.at += n;
    return start;
  }

  u8() {
    return this.bytes[this.take(1)];
  }

  u16() {
    return this.view.getUint16(this.take(2), true);
  }

  u32() {
    return this.view.getUint32(this.take(4), true);
  }

  u64() {
    return this.view.getBigUint64(this.take(8), true);
  }

  zeros(n) {
    const at = this.take(n);
    for (let i = at; i < at + n; i++) {
      if (this.bytes[i] !== 0) throw new FilterFormatError('invalid', 'reserved bytes must be zero');
    }
  }

  /** A LEB128 varint of at most 10 bytes and 64 bits: a Number when below 2^49, else a BigInt. */
  varint() {
    let value = 0;
    for (let shift = 0; shift < 49; shift += 7) {
      const byte = this.u8();
      value += (byte & 0x7f) * 2 ** shift;
      if ((byte & 0x80) === 0) return value;
    }
    let big = BigInt(value);
    for (let shift = 49; shift < 64; shift += 7) {
      const byte = this.u8();
      const bits = byte & 0x7f;
      if (shift === 63 && bits > 1) throw new FilterFormatError('invalid', 'varint overflows 64 bits');
      big |= BigInt(bits) << BigInt(shift);
      if ((byte & 0x80) === 0) return big;
    }
    throw new FilterFormatError('invalid', 'varint longer than 10 bytes');
  }

  /** Exactly `n` bytes must remain; returns their offset. */
  payload(n) {
    if (this.remaining() !== n) {
      throw new FilterFormatError(
        'length',
        `payload is ${this.remaining()} bytes but the header implies ${n}`,
      );
    }
    return this.take(n);
  }

  finish() {
    if (this.remaining() !== 0) throw new FilterFormatError('invalid', 'trailing bytes after the body');
  }
}

function magicOf(bytes) {
  return String.fromCharCode(...bytes.subarray(0, 4));
}

function printableMagic(bytes) {
  return JSON.stringify(Array.from(bytes.subarray(0, 4), (b) =>
    b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : `\\x${b.toString(16).padStart(2, '0')}`).join(''));
}

/** Checks length, magic, version, CRC and reserved bytes; a reader over the body. */
function open(input, magics) {
  const bytes = asBytes(input);
  if (bytes.length < 12) {
    throw new FilterFormatError('truncated', `input ends early: 12 bytes needed, ${bytes.length} available`);
  }
  const magic = magicOf(bytes);
  if (!magics.includes(magic)) {
    const expected = magics.map((m) => KINDS[m]).join(' or ');
    throw new FilterFormatError('magic', `not a ${expected} (magic ${printableMagic(bytes)})`);
  }
  if (bytes[4] !== FORMAT_VERSION) {
    throw new FilterFormatError(
      'version',
      `format version ${bytes[4]} is not supported (this reader knows ${FORMAT_VERSION})`,
    );
  }
  const end = bytes.length - 4;
  const stored = new DataView(bytes.buffer, bytes.byteOffset + end, 4).getUint32(0, true);
  const computed = crc32c(bytes, 0, end);
  if (stored !== computed) {
    throw new FilterFormatError(
      'checksum',
      `checksum mismatch: stored 0x${hex32(stored)}, computed 0x${hex32(computed)} (the bytes are damaged)`,
    );
  }
  if (bytes[5] !== 0 || bytes[6] !== 0 || bytes[7] !== 0) {
    throw new FilterFormatError('invalid', 'reserved header bytes must be zero');
  }
  return { magic, reader: new Reader(bytes, 8, end), bytes };
}

function hex32(n) {
  return n.toString(16).padStart(8, '0');
}

/** An envelope: header, body, CRC32C trailer. */
function seal(magic, body) {
  const out = new Uint8Array(8 + body.length + 4);
  for (let i = 0; i < 4; i++) out[i] = magic.charCodeAt(i);
  out[4] = FORMAT_VERSION;
  out.set(body, 8);
  const crc = crc32c(out, 0, 8 + body.length);
  new DataView(out.buffer).setUint32(8 + body.length, crc, true);
  return out;
}

function checkBloomGeometry(numBits, k) {
  if (numBits === 0n || numBits % 512n !== 0n) {
    throw new FilterFormatError('geometry', `invalid geometry: bit count ${numBits} is not a positive multiple of 512`);
  }
  if (numBits > BigInt(MAX_BITS)) {
    throw new FilterFormatError('geometry', `invalid geometry: bit count ${numBits} exceeds the limit of ${MAX_BITS}`);
  }
  if (k < 1 || k > MAX_K) {
    throw new FilterFormatError('geometry', `invalid geometry: hash count k = ${k} is outside 1..=${MAX_K}`);
  }
}

// ---------------------------------------------------------------- Bloom

/**
 * A blocked Bloom filter: the bit view of a counting domain's filter.
 * Fields: numBits, k, seed (Numbers); epoch, version, items (BigInt).
 */
export class BloomFilter {
  constructor(numBits, k, seed, bits, epoch = 0n, version = 0n, items = 0n) {
    this.kind = 'bloom';
    this.numBits = numBits;
    this.k = k;
    this.seed = seed;
    this.bits = bits;
    this.epoch = epoch;
    this.version = version;
    this.items = items;
  }

  /** Reads XABL bytes, or XACB bytes as their bit view (counter > 0). */
  static decode(input) {
    const { magic, reader: r, bytes } = open(input, ['XABL', 'XACB']);
    const numBits = r.u64();
    const k = r.u32();
    const seed = r.u32();
    checkBloomGeometry(numBits, k);
    const epoch = r.u64();
    const version = r.u64();
    const items = r.u64();
    const n = Number(numBits);
    if (magic === 'XABL') {
      const at = r.payload(n / 8);
      return new BloomFilter(n, k, seed, bytes.slice(at, at + n / 8), epoch, version, items);
    }
    const at = r.payload(n / 2);
    const bits = new Uint8Array(n / 8);
    for (let i = 0; i < bits.length; i++) {
      let b = 0;
      for (let j = 0; j < 4; j++) {
        const c = bytes[at + 4 * i + j];
        if (c & 0x0f) b |= 1 << (2 * j);
        if (c & 0xf0) b |= 2 << (2 * j);
      }
      bits[i] = b;
    }
    return new BloomFilter(n, k, seed, bits, epoch, version, items);
  }

  /** The XABL bytes of this filter (equal to the Rust encoder's). */
  encode() {
    const body = new Uint8Array(40 + this.bits.length);
    const v = new DataView(body.buffer);
    v.setBigUint64(0, BigInt(this.numBits), true);
    v.setUint32(8, this.k, true);
    v.setUint32(12, this.seed, true);
    v.setBigUint64(16, this.epoch, true);
    v.setBigUint64(24, this.version, true);
    v.setBigUint64(32, this.items, true);
    body.set(this.bits, 40);
    return seal('XABL', body);
  }

  bit(position) {
    return ((this.bits[Math.floor(position / 8)] >> (position % 8)) & 1) === 1;
  }

  /** The probe positions of `id` in this filter. */
  positions(id, digest) {
    return bloomPositions(id, this.numBits, this.k, this.seed, digest);
  }

  /** False: the domain certainly does not hold `id`. True: it may. */
  mightContain(id, digest) {
    return this.positions(id, digest).every((p) => this.bit(p));
  }

  /** Brings the filter to `delta.toVersion` (bytes or a decoded Delta); on error nothing changes. */
  applyDelta(input) {
    const delta = input instanceof Delta ? input : Delta.decode(input);
    delta.checkFits(this.epoch, this.version, this.numBits, 1);
    for (let i = 0; i < delta.count; i++) {
      const cell = delta.cells[i];
      const byte = Math.floor(cell / 8);
      const mask = 1 << (cell % 8);
      if (delta.values[i]) this.bits[byte] |= mask;
      else this.bits[byte] &= ~mask;
    }
    this.version = delta.toVersion;
    this.items = delta.items;
    return delta;
  }

  /** Bits set. */
  countOnes() {
    let n = 0;
    for (const b of this.bits) n += POPCOUNT[b];
    return n;
  }

  /** Share of bits set. */
  fillRatio() {
    return this.countOnes() / this.numBits;
  }

  /** False-positive rate implied by the bits set: the mean over blocks of (block fill)^k. */
  estimatedFpr() {
    let sum = 0;
    for (let at = 0; at < this.bits.length; at += 64) {
      let ones = 0;
      for (let i = at; i < at + 64; i++) ones += POPCOUNT[this.bits[i]];
      sum += (ones / BLOCK_BITS) ** this.k;
    }
    return sum / (this.numBits / BLOCK_BITS);
  }

  /** Bytes held in memory for the bits. */
  get byteLength() {
    return this.bits.length;
  }
}

const POPCOUNT = (() => {
  const t = new Uint8Array(256);
  for (let i = 1; i < 256; i++) t[i] = (i & 1) + t[i >> 1];
  return t;
})();

// ---------------------------------------------------------------- cuckoo

/**
 * A cuckoo filter: numBuckets buckets of 4 slots of fingerprintBits bits,
 * and the victim slot. Fields: numBuckets, fingerprintBits, seed, victim
 * ({ bucket, fingerprint } or null), rng (BigInt); epoch, version, items (BigInt).
 */
export class CuckooFilter {
  constructor(fields) {
    this.kind = 'cuckoo';
    Object.assign(this, fields);
  }

  static decode(input) {
    const { reader: r, bytes } = open(input, ['XACK']);
    const numBuckets = r.u64();
    const bits = r.u8();
    const hasVictim = r.u8();
    const victimFingerprint = r.u16();
    const seed = r.u32();
    if (numBuckets === 0n) throw new FilterFormatError('geometry', 'invalid geometry: bucket count must be at least 1');
    if (numBuckets > BigInt(MAX_BUCKETS)) {
      throw new FilterFormatError('geometry', `invalid geometry: bucket count ${numBuckets} exceeds the limit of ${MAX_BUCKETS}`);
    }
    if (bits < 4 || bits > 16) {
      throw new FilterFormatError('geometry', `invalid geometry: fingerprint width ${bits} bits is outside 4..=16`);
    }
    const epoch = r.u64();
    const version = r.u64();
    const victimBucket = r.u64();
    const rng = r.u64();
    const n = Number(numBuckets);
    const usedBits = 4 * n * bits;
    const tableBytes = Math.ceil(usedBits / 8);
    const at = r.payload(tableBytes);
    let victim = null;
    if (hasVictim === 0 && victimFingerprint === 0 && victimBucket === 0n) {
      victim = null;
    } else if (hasVictim === 1 && victimFingerprint !== 0 && victimFingerprint < 2 ** bits && victimBucket < numBuckets) {
      victim = { bucket: Number(victimBucket), fingerprint: victimFingerprint };
    } else {
      throw new FilterFormatError('invalid', 'invalid field: victim slot fields are inconsistent');
    }
    if (rng === 0n) throw new FilterFormatError('invalid', 'invalid field: generator state must be non-zero');
    if (usedBits % 8 !== 0 && bytes[at + tableBytes - 1] >> (usedBits % 8) !== 0) {
      throw new FilterFormatError('invalid', 'invalid field: padding bits after the last slot must be zero');
    }
    const filter = new CuckooFilter({
      numBuckets: n,
      fingerprintBits: bits,
      seed,
      victim,
      rng,
      epoch,
      version,
      items: 0n,
      table: bytes.slice(at, at + tableBytes),
    });
    let held = 0;
    for (let s = 0; s < 4 * n; s++) if (filter.slot(s) !== 0) held++;
    filter.items = BigInt(held + (victim ? 1 : 0));
    return filter;
  }

  encode() {
    const body = new Uint8Array(48 + this.table.length);
    const v = new DataView(body.buffer);
    const victim = this.victim ?? { bucket: 0, fingerprint: 0 };
    v.setBigUint64(0, BigInt(this.numBuckets), true);
    v.setUint8(8, this.fingerprintBits);
    v.setUint8(9, this.victim ? 1 : 0);
    v.setUint16(10, victim.fingerprint, true);
    v.setUint32(12, this.seed, true);
    v.setBigUint64(16, this.epoch, true);
    v.setBigUint64(24, this.version, true);
    v.setBigUint64(32, BigInt(victim.bucket), true);
    v.setBigUint64(40, this.rng, true);
    body.set(this.table, 48);
    return seal('XACK', body);
  }

  get numSlots() {
    return 4 * this.numBuckets;
  }

  /** The fingerprint in slot `s` (4 * bucket + j), 0 when empty. */
  slot(s) {
    const f = this.fingerprintBits;
    const bit = s * f;
    const byte = Math.floor(bit / 8);
    const t = this.table;
    const raw = (t[byte] ?? 0) | ((t[byte + 1] ?? 0) << 8) | ((t[byte + 2] ?? 0) << 16);
    return (raw >>> (bit % 8)) & ((1 << f) - 1);
  }

  setSlot(s, fingerprint) {
    const f = this.fingerprintBits;
    for (let b = 0; b < f; b++) {
      const bit = s * f + b;
      const byte = Math.floor(bit / 8);
      const mask = 1 << (bit % 8);
      if ((fingerprint >> b) & 1) this.table[byte] |= mask;
      else this.table[byte] &= ~mask;
    }
  }

  location(id, digest) {
    return cuckooLocation(id, this.numBuckets, this.fingerprintBits, this.seed, digest);
  }

  /** False: the domain certainly does not hold `id`. True: it may. */
  mightContain(id, digest) {
    const { bucket, fingerprint, alternate } = this.location(id, digest);
    for (const i of [bucket, alternate]) {
      for (let j = 0; j < 4; j++) if (this.slot(4 * i + j) === fingerprint) return true;
    }
    const v = this.victim;
    return v !== null && v.fingerprint === fingerprint && (v.bucket === bucket || v.bucket === alternate);
  }

  applyDelta(input) {
    const delta = input instanceof Delta ? input : Delta.decode(input);
    delta.checkFits(this.epoch, this.version, this.numSlots, this.fingerprintBits);
    this.version = delta.toVersion;
    for (let i = 0; i < delta.count; i++) this.setSlot(delta.cells[i], delta.values[i]);
    this.items = delta.items;
    return delta;
  }

  /** Share of slots holding a fingerprint (items / slots, as the Rust load factor). */
  fillRatio() {
    return Number(this.items) / this.numSlots;
  }

  /** Expected false-positive rate at the current load. */
  estimatedFpr() {
    const load = Math.min(Number(this.items) / this.numSlots, 1);
    return 1 - (1 - 1 / (2 ** this.fingerprintBits - 1)) ** (8 * load);
  }

  get byteLength() {
    return this.table.length;
  }
}

// ---------------------------------------------------------------- delta

/**
 * An XADL delta: cells (Bloom bits or cuckoo slots) with their values at
 * `toVersion`, in increasing cell order. `cells` (Float64Array) and
 * `values` (Uint16Array) hold `count` changes.
 */
export class Delta {
  constructor(fields) {
    Object.assign(this, fields);
  }

  static decode(input) {
    const { reader: r } = open(input, ['XADL']);
    const numCells = r.u64();
    const cellBits = r.u8();
    r.zeros(7);
    const epoch = r.u64();
    const fromVersion = r.u64();
    const toVersion = r.u64();
    const items = r.u64();
    const count = r.u64();
    if (numCells === 0n || numCells > BigInt(MAX_BITS)) {
      throw new FilterFormatError('invalid', 'invalid field: cell count is 0 or beyond the limit');
    }
    if (cellBits < 1 || cellBits > 16) throw new FilterFormatError('invalid', 'invalid field: cell width must be 1..=16 bits');
    if (fromVersion > toVersion) throw new FilterFormatError('invalid', 'invalid field: from_version is after to_version');
    if (count > BigInt(r.remaining())) {
      throw new FilterFormatError('truncated', `input ends early: ${count} changes need ${count} bytes, ${r.remaining()} available`);
    }
    const n = Number(count);
    const cells = new Float64Array(n);
    const values = new Uint16Array(n);
    const limit = Number(numCells);
    const scale = 2 ** cellBits;
    let previous = -1;
    for (let i = 0; i < n; i++) {
      const v = r.varint();
      let gap;
      let value;
      if (typeof v === 'number') {
        gap = Math.floor(v / scale);
        value = v % scale;
      } else {
        const g = v >> BigInt(cellBits);
        gap = g >= BigInt(MAX_BITS) ? Infinity : Number(g);
        value = Number(v & BigInt(scale - 1));
      }
      let cell;
      if (previous < 0) cell = gap;
      else if (gap === 0) throw new FilterFormatError('invalid', 'invalid field: cells not strictly increasing');
      else cell = previous + gap;
      if (cell >= limit) throw new FilterFormatError('invalid', 'invalid field: cell index beyond the filter');
      cells[i] = cell;
      values[i] = value;
      previous = cell;
    }
    r.finish();
    return new Delta({
      numCells: limit,
      cellBits,
      epoch,
      fromVersion,
      toVersion,
      items,
      count: n,
      cells,
      values,
    });
  }

  /** Throws DeltaApplyError unless this delta can be applied to a holder with this shape and position. */
  checkFits(epoch, version, numCells, cellBits) {
    if (this.numCells !== numCells || this.cellBits !== cellBits) {
      throw new DeltaApplyError(
        'geometry',
        `delta describes ${this.numCells} cells of ${this.cellBits} bits, the filter ${numCells} of ${cellBits}`,
      );
    }
    if (this.epoch !== epoch) {
      throw new DeltaApplyError('epoch', `delta is of epoch ${this.epoch}, the filter of epoch ${epoch}`);
    }
    if (version < this.fromVersion || version > this.toVersion) {
      throw new DeltaApplyError(
        'version',
        `delta covers versions (${this.fromVersion}, ${this.toVersion}] but the filter is at version ${version}`,
      );
    }
    const max = 2 ** cellBits;
    for (let i = 0; i < this.count; i++) {
      if (this.cells[i] >= numCells || this.values[i] >= max) {
        throw new DeltaApplyError('cell', `delta sets cell ${this.cells[i]} to ${this.values[i]}, outside the filter`);
      }
    }
  }
}

// ---------------------------------------------------------------- reading

/** A filter from its bytes, by magic: XABL or XACB → BloomFilter, XACK → CuckooFilter. */
export function decodeFilter(input) {
  const bytes = asBytes(input);
  if (bytes.length >= 4 && magicOf(bytes) === 'XACK') return CuckooFilter.decode(bytes);
  if (bytes.length >= 4 && !['XABL', 'XACB'].includes(magicOf(bytes))) {
    throw new FilterFormatError('magic', `not a Bloom filter or cuckoo filter (magic ${printableMagic(bytes)})`);
  }
  return BloomFilter.decode(bytes);
}

/** A failed request to a domain, in plain words; `status` is 0 when it could not be reached. */
export class DomainRequestError extends Error {
  constructor(message, status = 0, code = null) {
    super(message);
    this.name = 'DomainRequestError';
    this.status = status;
    this.code = code;
  }
}

async function request(url, fetchImpl, signal) {
  let response;
  try {
    response = await fetchImpl(url, { signal, cache: 'no-store' });
  } catch (e) {
    if (e && e.name === 'AbortError') throw e;
    throw new DomainRequestError(`could not be reached (${e && e.message ? e.message : e})`);
  }
  return response;
}

async function failure(response) {
  let code = null;
  let message = `answered HTTP ${response.status}`;
  try {
    const body = await response.json();
    if (body && body.code) {
      code = body.code;
      message = `answered HTTP ${response.status}: ${body.message ?? body.code}`;
    }
  } catch {
    // not JSON: keep the status alone
  }
  return new DomainRequestError(message, response.status, code);
}

/**
 * Brings a copy of a domain's filter up to date: the snapshot when there
 * is no copy yet, else the delta since its version, falling back to the
 * snapshot when the domain answers 409 (another epoch, or changes no
 * longer held) or the delta does not fit. `base` is the domain's address
 * (e.g. "http://127.0.0.1:7701"). Resolves to `{ filter, how, changes,
 * bytes }` where `how` is 'snapshot' or 'delta'; rejects with
 * DomainRequestError (unreachable, HTTP error) or FilterFormatError (bad
 * bytes, which are never used).
 */
export async function syncFilter(base, current, { fetch: fetchImpl = globalThis.fetch, signal } = {}) {
  const root = String(base).replace(/\/+$/, '');
  if (current) {
    const url = `${root}/v1/filter/delta?epoch=${current.epoch}&since=${current.version}`;
    const response = await request(url, fetchImpl, signal);
    if (response.ok) {
      const bytes = new Uint8Array(await response.arrayBuffer());
      const delta = Delta.decode(bytes);
      try {
        current.applyDelta(delta);
        return { filter: current, how: 'delta', changes: delta.count, bytes: bytes.length };
      } catch (e) {
        if (!(e instanceof DeltaApplyError)) throw e;
        // Does not fit this copy (rebuilt filter): take the snapshot below.
      }
    } else if (response.status !== 409) {
      throw await failure(response);
    } else {
      await response.body?.cancel?.();
    }
  }
  const response = await request(`${root}/v1/filter`, fetchImpl, signal);
  if (!response.ok) throw await failure(response);
  const bytes = new Uint8Array(await response.arrayBuffer());
  const filter = decodeFilter(bytes);
  return { filter, how: 'snapshot', changes: null, bytes: bytes.length };
}
