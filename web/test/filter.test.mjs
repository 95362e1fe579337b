// The JavaScript reader against the vectors written by the Rust library
// (crates/filter/examples/js_vectors.rs): every digest, position, answer
// and byte must agree, and every corrupt input must be refused the way the
// Rust reader refuses it.
//
//   node --test web/test/

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import {
  BloomFilter,
  CuckooFilter,
  Delta,
  DeltaApplyError,
  FilterFormatError,
  bloomPositions,
  crc32c,
  cuckooLocation,
  decodeFilter,
  idBytes,
  murmur3_x64_128,
} from '../xarchive-filter.js';

const vectors = JSON.parse(readFileSync(new URL('./vectors.json', import.meta.url), 'utf8'));

const bytes = (b64) => new Uint8Array(Buffer.from(b64, 'base64'));
const fromHex = (hex) => new Uint8Array(Buffer.from(hex, 'hex'));
const hex16 = (n) => n.toString(16).padStart(16, '0');
const same = (a, b) => Buffer.from(a).equals(Buffer.from(b));

test('the vectors file holds every section, each non-empty', () => {
  for (const key of ['crc32c', 'murmur3', 'bloom_positions', 'cuckoo_locations', 'bloom_filters',
    'cuckoo_filters', 'deltas', 'corrupt']) {
    assert.ok(Array.isArray(vectors[key]) && vectors[key].length > 0, key);
  }
});

test('CRC32C: check value and vectors', () => {
  assert.equal(crc32c(new TextEncoder().encode('123456789')), 0xe3069283);
  for (const v of vectors.crc32c) assert.equal(crc32c(fromHex(v.hex)), v.crc, v.hex);
});

test('MurmurHash3 x64_128: published vectors', () => {
  const cases = [
    ['', 0, 0n, 0n],
    ['foo', 0, 0xe271865701f54561n, 0x7eaf87e42bba7d87n],
    ['The quick brown fox jumps over the lazy dog', 0x9747b28c, 0x738a7f3bd2633121n, 0xf94573727ec016e5n],
    ['J001-WS·2023-Y-0001', 0, 0xe73bb54af40f3a34n, 0x40d6fa1c2e3de85dn],
    ['J001-WS·2023-Y-0001', 42, 0x89fee081ea678fd1n, 0x25b75d08ccbb1757n],
  ];
  for (const [key, seed, h1, h2] of cases) {
    assert.deepEqual(murmur3_x64_128(key, seed), { h1, h2 }, key);
  }
});

test("MurmurHash3 x64_128: SMHasher's verification value 0x6384BA69", () => {
  const key = new Uint8Array(256);
  const digests = new Uint8Array(256 * 16);
  const view = new DataView(digests.buffer);
  for (let len = 0; len < 256; len++) {
    key[len] = len;
    const { h1, h2 } = murmur3_x64_128(key.subarray(0, len), 256 - len);
    view.setBigUint64(len * 16, h1, true);
    view.setBigUint64(len * 16 + 8, h2, true);
  }
  const { h1 } = murmur3_x64_128(digests, 0);
  assert.equal(Number(h1 & 0xffffffffn), 0x6384ba69);
});

test('MurmurHash3 x64_128: every Rust digest (ASCII, CJK, emoji, empty, block boundaries)', () => {
  let strings = 0;
  for (const v of vectors.murmur3) {
    const raw = fromHex(v.hex);
    const expected = `${v.h1}/${v.h2}`;
    const fromBytes = murmur3_x64_128(raw, v.seed);
    assert.equal(`${hex16(fromBytes.h1)}/${hex16(fromBytes.h2)}`, expected, `bytes ${v.hex} seed ${v.seed}`);
    if (v.id !== undefined) {
      strings++;
      assert.ok(same(idBytes(v.id), raw), `UTF-8 of ${JSON.stringify(v.id)}`);
      const fromString = murmur3_x64_128(v.id, v.seed);
      assert.equal(`${hex16(fromString.h1)}/${hex16(fromString.h2)}`, expected, `${JSON.stringify(v.id)} seed ${v.seed}`);
    }
  }
  assert.ok(strings > 300);
});

test('IDs are hashed as given: no Unicode normalisation, lone surrogates refused', () => {
  assert.notDeepEqual(murmur3_x64_128('é'), murmur3_x64_128('e\u0301'));
  assert.throws(() => idBytes('档\ud800'), TypeError);
  assert.throws(() => murmur3_x64_128('\udc00x'), TypeError);
  assert.throws(() => idBytes(42), TypeError);
  assert.throws(() => murmur3_x64_128('x', -1), RangeError);
  assert.throws(() => murmur3_x64_128('x', 2 ** 32), RangeError);
});

test('Bloom probe positions match, up to k = 32 and 2^38 bits', () => {
  for (const v of vectors.bloom_positions) {
    assert.deepEqual(bloomPositions(v.id, v.num_bits, v.k, v.seed), v.positions,
      `${JSON.stringify(v.id)} in (${v.num_bits}, ${v.k}, ${v.seed})`);
  }
});

test('cuckoo bucket, fingerprint and alternate match, up to 2^34 buckets', () => {
  for (const v of vectors.cuckoo_locations) {
    const got = cuckooLocation(v.id, v.num_buckets, v.fingerprint_bits, v.seed);
    assert.deepEqual(got, { bucket: v.bucket, fingerprint: v.fingerprint, alternate: v.alternate },
      `${JSON.stringify(v.id)} in (${v.num_buckets}, ${v.fingerprint_bits}, ${v.seed})`);
    // alt is an involution
    assert.equal(cuckooLocation(v.id, v.num_buckets, v.fingerprint_bits, v.seed).alternate, v.alternate);
  }
});

test('Bloom filters (XABL): fields, every answer, and re-encoding byte for byte', () => {
  for (const v of vectors.bloom_filters) {
    const input = bytes(v.xabl);
    const f = BloomFilter.decode(input);
    assert.equal(f.numBits, v.num_bits, v.name);
    assert.equal(f.k, v.k, v.name);
    assert.equal(f.seed, v.seed, v.name);
    assert.equal(f.epoch, BigInt(v.epoch), v.name);
    assert.equal(f.version, BigInt(v.version), v.name);
    assert.equal(f.items, BigInt(v.items), v.name);
    assert.equal(f.countOnes(), v.ones, v.name);
    let yes = 0;
    for (const [id, maybe] of v.queries) {
      assert.equal(f.mightContain(id), maybe, `${v.name}: ${JSON.stringify(id)}`);
      if (maybe) yes++;
    }
    assert.ok(same(f.encode(), input), `${v.name}: encode(decode(x)) = x`);
    assert.ok(decodeFilter(input) instanceof BloomFilter);
    if (v.queries.length > 0 && v.num_bits > 512) assert.ok(yes < v.queries.length, v.name);
  }
});

test('counting filters (XACB) are read as their bit view', () => {
  for (const v of vectors.bloom_filters) {
    const view = BloomFilter.decode(bytes(v.xacb));
    assert.ok(same(view.encode(), bytes(v.xabl)), `${v.name}: bit view of XACB = XABL`);
    for (const [id, maybe] of v.queries) assert.equal(view.mightContain(id), maybe, `${v.name}: ${id}`);
  }
});

test('a crowded filter gives the same false positives as Rust', () => {
  const crowded = vectors.bloom_filters.find((v) => v.name.includes('crowded'));
  const f = BloomFilter.decode(bytes(crowded.xabl));
  const falsePositives = crowded.queries.filter(([id, maybe]) => maybe && id.startsWith('NOT-') || maybe && id.startsWith('🚫'));
  for (const [id] of falsePositives) assert.equal(f.mightContain(id), true, id);
  const cuckoo = vectors.cuckoo_filters.find((v) => v.name.includes('4-bit'));
  assert.ok(cuckoo.queries.filter(([id, maybe]) => maybe && id.startsWith('NOT-')).length > 0,
    'the 4-bit cuckoo vectors include false positives');
});

test('cuckoo filters (XACK): fields, victim slot, every answer, re-encoding', () => {
  let sawVictim = false;
  for (const v of vectors.cuckoo_filters) {
    const input = bytes(v.xack);
    const f = CuckooFilter.decode(input);
    assert.equal(f.numBuckets, v.num_buckets, v.name);
    assert.equal(f.fingerprintBits, v.fingerprint_bits, v.name);
    assert.equal(f.seed, v.seed, v.name);
    assert.equal(f.epoch, BigInt(v.epoch), v.name);
    assert.equal(f.version, BigInt(v.version), v.name);
    assert.equal(f.items, BigInt(v.items), v.name);
    assert.equal(f.victim !== null, v.full, v.name);
    sawVictim ||= v.full;
    for (const [id, maybe] of v.queries) {
      assert.equal(f.mightContain(id), maybe, `${v.name}: ${JSON.stringify(id)}`);
    }
    assert.ok(same(f.encode(), input), `${v.name}: encode(decode(x)) = x`);
    assert.ok(decodeFilter(input) instanceof CuckooFilter);
  }
  assert.ok(sawVictim, 'a vector has its victim slot taken');
});

test('deltas: decoded fields, applied bytes, refusals leave the filter unchanged', () => {
  for (const v of vectors.deltas) {
    const delta = Delta.decode(bytes(v.delta));
    assert.equal(delta.numCells, v.fields.num_cells, v.name);
    assert.equal(delta.cellBits, v.fields.cell_bits, v.name);
    assert.equal(delta.epoch, BigInt(v.fields.epoch), v.name);
    assert.equal(delta.fromVersion, BigInt(v.fields.from_version), v.name);
    assert.equal(delta.toVersion, BigInt(v.fields.to_version), v.name);
    assert.equal(delta.items, BigInt(v.fields.items), v.name);
    assert.deepEqual(
      Array.from({ length: delta.count }, (_, i) => [delta.cells[i], delta.values[i]]),
      v.fields.changes,
      v.name,
    );
    const base = bytes(v.base);
    const filter = decodeFilter(base);
    if (v.result !== undefined) {
      filter.applyDelta(bytes(v.delta));
      assert.ok(same(filter.encode(), bytes(v.result)), `${v.name}: bytes after the delta`);
      // Applying it again is harmless.
      filter.applyDelta(delta);
      assert.ok(same(filter.encode(), bytes(v.result)), `${v.name}: applied twice`);
    } else {
      assert.ok(v.apply_error, v.name);
      assert.throws(() => filter.applyDelta(delta), (e) => e instanceof DeltaApplyError && e.kind === v.apply_error,
        `${v.name}: refused as ${v.apply_error}`);
      assert.ok(same(filter.encode(), base), `${v.name}: unchanged after the refusal`);
    }
  }
});

test('a delta brings a copy to the same answers as the source', () => {
  const v = vectors.deltas.find((d) => d.name === 'bit view: v0 to v2');
  const copy = decodeFilter(bytes(v.base));
  const target = decodeFilter(bytes(v.result));
  copy.applyDelta(bytes(v.delta));
  for (let i = 0; i < 200; i++) {
    const id = `J001-WS·2000-Y-${String(i).padStart(5, '0')}`;
    assert.equal(copy.mightContain(id), target.mightContain(id), id);
  }
});

const decoders = {
  bloom: (b) => BloomFilter.decode(b),
  counting: (b) => BloomFilter.decode(b),
  cuckoo: (b) => CuckooFilter.decode(b),
  delta: (b) => Delta.decode(b),
};

test('corrupt inputs are refused with the same kind of error as in Rust', () => {
  for (const v of vectors.corrupt) {
    const input = bytes(v.bytes);
    assert.throws(() => decoders[v.decoder](input), (e) => {
      assert.ok(e instanceof FilterFormatError, `${v.decoder} ${v.name}: ${e}`);
      assert.equal(e.kind, v.error, `${v.decoder} "${v.name}": ${e.message}`);
      assert.ok(e.message.length > 10);
      return true;
    });
    if (v.decoder !== 'delta') {
      assert.throws(() => decodeFilter(input), FilterFormatError, `decodeFilter: ${v.name}`);
    }
  }
});

test('every single-bit flip of a filter is caught by the checksum', () => {
  const v = vectors.cuckoo_filters.find((c) => c.name.includes('FORMAT.md'));
  const good = bytes(v.xack);
  for (let bit = 0; bit < good.length * 8; bit++) {
    const bad = good.slice();
    bad[bit >> 3] ^= 1 << (bit & 7);
    assert.throws(() => decodeFilter(bad), FilterFormatError, `bit ${bit}`);
  }
});

test('decodeFilter refuses deltas and foreign bytes; decoders take ArrayBuffers', () => {
  const delta = bytes(vectors.deltas[0].delta);
  assert.throws(() => decodeFilter(delta), (e) => e.kind === 'magic');
  assert.throws(() => decodeFilter(new TextEncoder().encode('<html>not a filter</html>')), (e) => e.kind === 'magic');
  assert.throws(() => decodeFilter(new Uint8Array(3)), (e) => e.kind === 'truncated');
  assert.throws(() => decodeFilter('XABL'), TypeError);
  const xabl = bytes(vectors.bloom_filters[0].xabl);
  const copy = xabl.slice();
  assert.equal(decodeFilter(copy.buffer).numBits, vectors.bloom_filters[0].num_bits);
});
