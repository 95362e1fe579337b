// Checking a certificate in the browser, with nothing but the cluster's trust list: the payload a QR code holds (docs/FORMAT.md, "Certificates") taken apart and every seal on it checked, as `xarchive certificate verify` does offline.
//
// Written here, not taken from a package: the page is ES modules served
// by the domain itself, with no build step, and no kept JavaScript library
// ships SM2 and SM3 as one dependency-free module. Each part is small and
// tested against the standard's vectors and against payloads the Rust
// crate made (web/test/seal.test.mjs): SM3 (GB/T 32905), SM2 signature
// verification (GB/T 32918, the signer ID GM/T 0009's default), base45
// (RFC 9285), CBOR (RFC 8949, what a statement uses), COSE_Sign1
// (RFC 9052). Ed25519 is WebCrypto's. Pure: no DOM.

// --- SM3 ---------------------------------------------------------------

const IV = [0x7380166f, 0x4914b2b9, 0x172442d7, 0xda8a0600, 0xa96f30bc, 0x163138aa, 0xe38dee4d, 0xb0fb0e4e];

const rotl = (x, n) => ((x << (n & 31)) | (x >>> (32 - (n & 31)))) >>> 0;
const p0 = (x) => (x ^ rotl(x, 9) ^ rotl(x, 17)) >>> 0;
const p1 = (x) => (x ^ rotl(x, 15) ^ rotl(x, 23)) >>> 0;

/** SM3 of `bytes` (a Uint8Array): 32 bytes. */
export function sm3(bytes) {
  const bitLength = BigInt(bytes.length) * 8n;
  const padded = new Uint8Array(Math.ceil((bytes.length + 9) / 64) * 64);
  padded.set(bytes);
  padded[bytes.length] = 0x80;
  new DataView(padded.buffer).setBigUint64(padded.length - 8, bitLength);
  const v = IV.slice();
  const w = new Uint32Array(68);
  const w1 = new Uint32Array(64);
  const view = new DataView(padded.buffer);
  for (let at = 0; at < padded.length; at += 64) {
    for (let j = 0; j < 16; j++) w[j] = view.getUint32(at + j * 4);
    for (let j = 16; j < 68; j++) {
      w[j] = (p1(w[j - 16] ^ w[j - 9] ^ rotl(w[j - 3], 15)) ^ rotl(w[j - 13], 7) ^ w[j - 6]) >>> 0;
    }
    for (let j = 0; j < 64; j++) w1[j] = (w[j] ^ w[j + 4]) >>> 0;
    let [a, b, c, d, e, f, g, h] = v;
    for (let j = 0; j < 64; j++) {
      const t = j < 16 ? 0x79cc4519 : 0x7a879d8a;
      const ss1 = rotl((rotl(a, 12) + e + rotl(t, j)) >>> 0, 7);
      const ss2 = (ss1 ^ rotl(a, 12)) >>> 0;
      const ff = j < 16 ? a ^ b ^ c : (a & b) | (a & c) | (b & c);
      const gg = j < 16 ? e ^ f ^ g : (e & f) | (~e & g);
      const tt1 = (ff + d + ss2 + w1[j]) >>> 0;
      const tt2 = (gg + h + ss1 + w[j]) >>> 0;
      d = c;
      c = rotl(b, 9);
      b = a;
      a = tt1;
      h = g;
      g = rotl(f, 19);
      f = e;
      e = p0(tt2);
    }
    [a, b, c, d, e, f, g, h].forEach((x, i) => {
      v[i] = (v[i] ^ x) >>> 0;
    });
  }
  const out = new Uint8Array(32);
  const ov = new DataView(out.buffer);
  v.forEach((x, i) => ov.setUint32(i * 4, x));
  return out;
}

// --- SM2 ---------------------------------------------------------------

const P = 0xfffffffeffffffffffffffffffffffffffffffff00000000ffffffffffffffffn;
const A = 0xfffffffeffffffffffffffffffffffffffffffff00000000fffffffffffffffcn;
const B = 0x28e9fa9e9d9f5e344d5a9e4bcf6509a7f39789f515ab8f92ddbcbd414d940e93n;
const N = 0xfffffffeffffffffffffffffffffffff7203df6b21c6052b53bbf40939d54123n;
const GX = 0x32c4ae2c1f1981195f9904466a39c9948fe30bbff2660be1715a4589334c74c7n;
const GY = 0xbc3736a2f4f6779c59bdcee36b692153d0a9877cc62a474002df32e52139f0a0n;

/** The signer's ID in every SM2 signature (GM/T 0009's default). */
export const SM2_DIST_ID = '1234567812345678';

const mod = (x, m = P) => ((x % m) + m) % m;

function inverse(x, m = P) {
  let [a, b, u, v] = [mod(x, m), m, 1n, 0n];
  while (a !== 0n) {
    const q = b / a;
    [a, b] = [b - q * a, a];
    [u, v] = [v - q * u, u];
  }
  return mod(v, m);
}

/** Points in Jacobian coordinates (X, Y, Z): x = X/Z², y = Y/Z³; Z = 0 is the point at infinity. */
function double([x, y, z]) {
  if (z === 0n || y === 0n) return [0n, 1n, 0n];
  const y2 = mod(y * y);
  const s = mod(4n * x * y2);
  const z2 = mod(z * z);
  const m = mod(3n * x * x + A * z2 * z2);
  const x3 = mod(m * m - 2n * s);
  return [x3, mod(m * (s - x3) - 8n * y2 * y2), mod(2n * y * z)];
}

function add(p, q) {
  if (p[2] === 0n) return q;
  if (q[2] === 0n) return p;
  const [x1, y1, z1] = p;
  const [x2, y2, z2] = q;
  const z1z1 = mod(z1 * z1);
  const z2z2 = mod(z2 * z2);
  const u1 = mod(x1 * z2z2);
  const u2 = mod(x2 * z1z1);
  const s1 = mod(y1 * z2 * z2z2);
  const s2 = mod(y2 * z1 * z1z1);
  if (u1 === u2) return s1 === s2 ? double(p) : [0n, 1n, 0n];
  const h = mod(u2 - u1);
  const r = mod(s2 - s1);
  const h2 = mod(h * h);
  const h3 = mod(h * h2);
  const x3 = mod(r * r - h3 - 2n * u1 * h2);
  return [x3, mod(r * (u1 * h2 - x3) - s1 * h3), mod(h * z1 * z2)];
}

/** a·G + b·Q (Shamir's trick), in affine coordinates; null at infinity. */
function twoMultiples(a, b, q) {
  const g = [GX, GY, 1n];
  const both = add(g, q);
  let acc = [0n, 1n, 0n];
  for (let i = 255; i >= 0; i--) {
    acc = double(acc);
    const ba = (a >> BigInt(i)) & 1n;
    const bb = (b >> BigInt(i)) & 1n;
    if (ba && bb) acc = add(acc, both);
    else if (ba) acc = add(acc, g);
    else if (bb) acc = add(acc, q);
  }
  if (acc[2] === 0n) return null;
  const zi = inverse(acc[2]);
  const zi2 = mod(zi * zi);
  return [mod(acc[0] * zi2), mod(acc[1] * zi2 * zi)];
}

const toBig = (bytes) => bytes.reduce((n, b) => (n << 8n) | BigInt(b), 0n);

function toBytes(n, length = 32) {
  const out = new Uint8Array(length);
  for (let i = length - 1; i >= 0; i--) {
    out[i] = Number(n & 0xffn);
    n >>= 8n;
  }
  return out;
}

function concat(...parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

const utf8 = (text) => new TextEncoder().encode(text);

/** Whether `signature` (r‖s, 64 bytes) is the SM2 signature over `message` of the key whose uncompressed point is `point` (65 bytes, 0x04‖x‖y). */
export function sm2Verify(point, message, signature) {
  if (point.length !== 65 || point[0] !== 4 || signature.length !== 64) return false;
  const x = toBig(point.slice(1, 33));
  const y = toBig(point.slice(33));
  if (x >= P || y >= P || mod(y * y - (x * x * x + A * x + B)) !== 0n) return false;
  const r = toBig(signature.slice(0, 32));
  const s = toBig(signature.slice(32));
  if (r < 1n || r >= N || s < 1n || s >= N) return false;
  const id = utf8(SM2_DIST_ID);
  const entl = new Uint8Array([(id.length * 8) >> 8, (id.length * 8) & 0xff]);
  const za = sm3(concat(entl, id, toBytes(A), toBytes(B), toBytes(GX), toBytes(GY), point.slice(1)));
  const e = toBig(sm3(concat(za, message)));
  const t = mod(r + s, N);
  if (t === 0n) return false;
  const sum = twoMultiples(s, t, [x, y, 1n]);
  return sum !== null && mod(e + sum[0], N) === r;
}

// --- base45, CBOR, COSE ------------------------------------------------

const BASE45 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ $%*+-./:';

/** The bytes `text` holds in base45; throws on anything else. */
export function base45Decode(text) {
  const out = [];
  const value = (c) => {
    const v = BASE45.indexOf(c);
    if (v < 0) throw new Error(`not base45: ${JSON.stringify(c)}`);
    return v;
  };
  for (let i = 0; i < text.length; i += 3) {
    const chunk = text.slice(i, i + 3);
    if (chunk.length === 1) throw new Error('base45 cut short');
    const n = [...chunk].reduce((sum, c, k) => sum + value(c) * 45 ** k, 0);
    if (chunk.length === 3) {
      if (n > 0xffff) throw new Error('not base45');
      out.push(n >> 8, n & 0xff);
    } else {
      if (n > 0xff) throw new Error('not base45');
      out.push(n);
    }
  }
  return new Uint8Array(out);
}

/** A CBOR data item decoded (maps as Map, byte strings as Uint8Array); throws on what a statement never holds. */
export function cborDecode(bytes) {
  let at = 0;
  const need = (n) => {
    if (at + n > bytes.length) throw new Error('CBOR cut short');
  };
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const argument = (info) => {
    if (info < 24) return info;
    const size = { 24: 1, 25: 2, 26: 4, 27: 8 }[info];
    if (!size) throw new Error('CBOR of a kind no statement uses');
    need(size);
    let v;
    if (size === 1) v = view.getUint8(at);
    else if (size === 2) v = view.getUint16(at);
    else if (size === 4) v = view.getUint32(at);
    else {
      const big = view.getBigUint64(at);
      v = big <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(big) : big;
    }
    at += size;
    return v;
  };
  const item = (depth) => {
    if (depth > 16) throw new Error('CBOR nested too deep');
    need(1);
    const head = bytes[at++];
    const major = head >> 5;
    const info = head & 31;
    switch (major) {
      case 0:
        return argument(info);
      case 1: {
        const v = argument(info);
        return typeof v === 'bigint' ? -1n - v : -1 - v;
      }
      case 2:
      case 3: {
        const length = Number(argument(info));
        need(length);
        const slice = bytes.slice(at, at + length);
        at += length;
        return major === 2 ? slice : new TextDecoder('utf-8', { fatal: true }).decode(slice);
      }
      case 4: {
        const length = Number(argument(info));
        if (length > bytes.length) throw new Error('CBOR array longer than its bytes');
        return Array.from({ length }, () => item(depth + 1));
      }
      case 5: {
        const length = Number(argument(info));
        if (length > bytes.length) throw new Error('CBOR map longer than its bytes');
        const map = new Map();
        for (let i = 0; i < length; i++) map.set(item(depth + 1), item(depth + 1));
        return map;
      }
      case 6:
        argument(info);
        return item(depth + 1);
      default:
        if (info === 20) return false;
        if (info === 21) return true;
        if (info === 22) return null;
        throw new Error('CBOR of a kind no statement uses');
    }
  };
  const value = item(0);
  if (at !== bytes.length) throw new Error('bytes after the CBOR item');
  return value;
}

/** A CBOR head (major type, length). */
function head(major, length) {
  if (length < 24) return new Uint8Array([(major << 5) | length]);
  if (length < 0x100) return new Uint8Array([(major << 5) | 24, length]);
  if (length < 0x10000) return new Uint8Array([(major << 5) | 25, length >> 8, length & 0xff]);
  return new Uint8Array([(major << 5) | 26, length >>> 24, (length >> 16) & 0xff, (length >> 8) & 0xff, length & 0xff]);
}

/** COSE's algorithm numbers: EdDSA's registered one, SM2 with SM3's of the private range (docs/FORMAT.md). */
export const ALGORITHMS = { [-8]: 'ed25519', [-65600]: 'sm2-sm3' };

/** A COSE_Sign1 taken apart: its algorithm, key ID (hex), payload, signature and the bytes the signature is over. */
export function openSealed(bytes) {
  const sign1 = cborDecode(bytes);
  if (!Array.isArray(sign1) || sign1.length !== 4) throw new Error('not a COSE_Sign1');
  const [protectedBytes, , payload, signature] = sign1;
  if (!(protectedBytes instanceof Uint8Array) || !(payload instanceof Uint8Array) || !(signature instanceof Uint8Array)) {
    throw new Error('not a COSE_Sign1');
  }
  const header = cborDecode(protectedBytes);
  const algorithm = ALGORITHMS[header.get(1)];
  const kid = header.get(4);
  if (!algorithm || !(kid instanceof Uint8Array) || kid.length !== 8) throw new Error('no algorithm or key ID');
  const context = utf8('Signature1');
  const signed = concat(head(4, 4), head(3, context.length), context, head(2, protectedBytes.length), protectedBytes, head(2, 0), head(2, payload.length), payload);
  return { algorithm, kid: hex(kid), payload, signature, signed };
}

export const hex = (bytes) => [...bytes].map((b) => b.toString(16).padStart(2, '0')).join('');

export function unbase64(text) {
  const raw = atob(text);
  return Uint8Array.from(raw, (c) => c.charCodeAt(0));
}

// --- keys and the trust list --------------------------------------------

const ED25519_SPKI = '302a300506032b6570032100';

/** A public key from its DER SubjectPublicKeyInfo: `{ algorithm, raw }`. */
export function publicKey(spki) {
  const text = hex(spki);
  if (text.startsWith(ED25519_SPKI) && spki.length === 44) return { algorithm: 'ed25519', raw: spki.slice(12) };
  // id-ecPublicKey with the SM2 curve (1.2.156.10197.1.301), the point last.
  if (text.includes('06082a811ccf5501822d') && spki[spki.length - 65] === 4) {
    return { algorithm: 'sm2-sm3', raw: spki.slice(spki.length - 65) };
  }
  throw new Error('not a public key of SM2 or Ed25519');
}

/** Whether `signature` is `key`'s over `message`. */
export async function verifySignature(key, message, signature) {
  if (key.algorithm === 'sm2-sm3') return sm2Verify(key.raw, message, signature);
  const imported = await crypto.subtle.importKey('raw', key.raw, { name: 'Ed25519' }, false, ['verify']);
  return crypto.subtle.verify({ name: 'Ed25519' }, imported, signature, message);
}

/** The SHA-256 of a public key's SubjectPublicKeyInfo in groups of four hex digits, as operators publish the anchor's. */
export async function fingerprint(spki) {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', spki));
  return hex(digest).toUpperCase().match(/.{4}/g).join(' ');
}

/** A signed trust list (`GET /v1/trust-list`) opened: the list, if its anchor signed it (throws otherwise). */
export async function openTrustList(signed) {
  const anchorSpki = unbase64(signed.anchor);
  const anchor = publicKey(anchorSpki);
  const payload = unbase64(signed.payload);
  if (!(await verifySignature(anchor, payload, unbase64(signed.signature)))) {
    throw new Error('the trust list does not match its signature');
  }
  const list = JSON.parse(new TextDecoder().decode(payload));
  if (list.format !== 'xarchive trust list/1') throw new Error('not a trust list');
  return { list, anchor: await fingerprint(anchorSpki) };
}

// --- statements and the verdict -----------------------------------------

const time = (text) => Math.floor(Date.parse(text) / 1000);

/** Why a key may not be trusted for something sealed at `at` (seconds), or null. */
function keyNotValid(record, at) {
  if (record.revoked) return `it was revoked on ${record.revoked}`;
  if (!(at >= time(record.not_before))) return `it was valid only from ${record.not_before}`;
  if (record.not_after && !(at < time(record.not_after))) return `it was valid only until ${record.not_after}`;
  return null;
}

class Rejected extends Error {
  constructor(reason, message) {
    super(message);
    this.reason = reason;
  }
}

/** Opens and checks sealed bytes against the trust list: the statement (decoded by `decode`), and the archive whose key sealed it. */
async function check(list, bytes, decode, at) {
  let opened;
  try {
    opened = openSealed(bytes);
  } catch (e) {
    throw new Rejected('malformed', e.message);
  }
  let archive = null;
  let record = null;
  for (const a of list.archives ?? []) {
    record = (a.keys ?? []).find((k) => k.id === opened.kid);
    if (record) {
      archive = a;
      break;
    }
  }
  if (!record) throw new Rejected('unknown_key', `sealed by the key ${opened.kid}, which the trust list does not hold`);
  const key = publicKey(unbase64(record.public_key));
  if (key.algorithm !== opened.algorithm || !(await verifySignature(key, opened.signed, opened.signature))) {
    throw new Rejected('changed', `the seal of ${archive.display_name || archive.domain} does not match what is sealed: it was changed`);
  }
  let statement;
  try {
    statement = decode(cborDecode(opened.payload));
  } catch (e) {
    throw new Rejected('malformed', e.message);
  }
  const why = keyNotValid(record, at(statement));
  if (why) throw new Rejected('key_not_valid', `sealed by a key of ${archive.display_name || archive.domain} that may not be trusted for it: ${why}`);
  return { statement, archive };
}

function fields(value, kind, length) {
  if (!Array.isArray(value) || value.length !== length || value[0] !== kind) throw new Error(`not a ${kind}`);
  return value;
}

const digestHex = (d) => (d instanceof Uint8Array ? hex(d) : null);

/** A copy's statement, by position (docs/FORMAT.md). */
function copyStatement(value) {
  const [, holding, receiving, requestId, archiveNumber, title, , recordDate, released, content] = fields(value, 'xarchive copy/1', 11);
  return { holding, receiving, requestId, archiveNumber, title, recordDate, released: Number(released), contentSha256: digestHex(content) };
}

/** A certificate's statement, by position. */
function certificateStatement(value) {
  const [, issuer, code, requestId, issued, applicantName, , purpose, searchedBy, copies, notProvided, sheet, sheets] = fields(value, 'xarchive certificate/1', 13);
  return {
    issuer,
    code,
    requestId,
    issued: Number(issued),
    applicantName,
    purpose,
    searchedBy,
    copies,
    notProvided: notProvided.map(([holding, records, why, reason]) => ({ holding, records, why, reason })),
    sheet: Number(sheet),
    sheets: Number(sheets),
  };
}

/** The bytes a certificate's payload (`XA1:…`, as its QR code holds it) seals: base45, then zlib. */
export async function payloadBytes(text) {
  const body = String(text ?? '').replace(/[\r\n\t]/g, '');
  if (!body.startsWith('XA1:')) throw new Rejected('malformed', 'a certificate’s payload begins with XA1:');
  let compressed;
  try {
    compressed = base45Decode(body.slice(4));
  } catch (e) {
    throw new Rejected('malformed', e.message);
  }
  try {
    const stream = new Blob([compressed]).stream().pipeThrough(new DecompressionStream('deflate'));
    const reader = stream.getReader();
    const parts = [];
    let size = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.length;
      if (size > 64 * 1024) throw new Error('the payload expands to more than a certificate holds');
      parts.push(value);
    }
    return concat(...parts);
  } catch (e) {
    throw new Rejected('malformed', `the payload does not decompress (${e.message})`);
  }
}

/**
 * Checks a certificate's payload against an opened trust list `list`:
 * `{ valid: true, certificate, issuer, copies }`, or `{ valid: false,
 * reason, message }` with `reason` one of `malformed`, `unknown_key`,
 * `key_not_valid`, `changed`, `mismatch`.
 */
export async function verifyCertificate(payload, list) {
  try {
    const sealed = await payloadBytes(payload);
    const { statement, archive } = await check(list, sealed, certificateStatement, (s) => s.issued);
    if (statement.issuer !== archive.domain || !statement.code.startsWith(`${archive.domain}.`)) {
      throw new Rejected('mismatch', `the certificate says ${statement.issuer} issued it, but ${archive.domain} sealed it`);
    }
    const copies = [];
    for (const [n, bytes] of statement.copies.entries()) {
      if (!(bytes instanceof Uint8Array)) throw new Rejected('malformed', 'a copy is not sealed bytes');
      const copy = await check(list, bytes, copyStatement, (c) => c.released);
      const c = copy.statement;
      if (c.holding !== copy.archive.domain) throw new Rejected('mismatch', `copy ${n + 1} says it is from ${c.holding}, but ${copy.archive.domain} sealed it`);
      if (c.receiving !== statement.issuer || c.requestId !== statement.requestId) {
        throw new Rejected('mismatch', `copy ${n + 1} was sealed for another certificate`);
      }
      copies.push({ ...c, holdingName: copy.archive.display_name || copy.archive.domain });
    }
    return { valid: true, certificate: statement, issuer: archive, copies };
  } catch (e) {
    if (e instanceof Rejected) return { valid: false, reason: e.reason, message: e.message };
    return { valid: false, reason: 'malformed', message: e.message };
  }
}
