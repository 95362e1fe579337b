// The page's certificate verifier (web/seal.js) against the standard's SM3 examples and against what the Rust crate sealed: every verdict the same as `xarchive certificate verify` gives.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { base45Decode, cborDecode, openTrustList, sm2Verify, sm3, verifyCertificate } from '../seal.js';

const vectors = JSON.parse(readFileSync(new URL('./seal-vectors.json', import.meta.url), 'utf8'));
const bytes = (hex) => Uint8Array.from(hex.match(/../g) ?? [], (b) => parseInt(b, 16));
const hex = (b) => [...b].map((x) => x.toString(16).padStart(2, '0')).join('');

test('sm3 gives the digests the Rust crate and the standard give', () => {
  for (const v of vectors.sm3) assert.equal(hex(sm3(bytes(v.message))), v.digest);
  assert.equal(hex(sm3(new TextEncoder().encode('abc'))), '66c7f0f462eeedd9d1f2d46bdc10e4e24167c4875cf2f7a2297da02b8f4ba8e0');
});

test('an sm2 signature checks under its key and fails changed or under another key', () => {
  for (const v of vectors.sm2) {
    assert.equal(sm2Verify(bytes(v.point), bytes(v.message), bytes(v.signature)), v.valid, JSON.stringify(v));
  }
  const v = vectors.sm2[0];
  assert.equal(sm2Verify(bytes(v.point), bytes(v.message), bytes(v.signature).slice(0, 63)), false);
  assert.equal(sm2Verify(bytes(v.point).slice(0, 64), bytes(v.message), bytes(v.signature)), false);
});

test('the trust list opens under its anchor and not once changed', async () => {
  const { list, anchor } = await openTrustList(vectors.trust_list);
  assert.equal(anchor, vectors.anchor);
  assert.equal(list.archives.length, 3);
  const changed = { ...vectors.trust_list, payload: vectors.trust_list.payload.replace('A', 'B') };
  await assert.rejects(openTrustList(changed));
});

test('each certificate gets the verdict the Rust verifier gave it', async () => {
  const { list } = await openTrustList(vectors.trust_list);
  for (const c of vectors.certificates) {
    const got = await verifyCertificate(c.payload, list);
    assert.equal(got.valid, c.valid, `${c.name}: ${got.message}`);
    if (c.valid) {
      assert.equal(got.certificate.code, c.code);
      assert.equal(got.certificate.applicantName, c.applicant_name);
      assert.equal(got.issuer.domain, c.issuer);
      assert.equal(got.copies.length, c.copies);
    } else {
      assert.equal(got.reason, c.reason, `${c.name}: ${got.message}`);
    }
  }
});

test('nothing malformed makes the verifier throw', async () => {
  const { list } = await openTrustList(vectors.trust_list);
  for (const bad of ['', 'XA1:', 'XA1:::::', 'hello', 'XA1:00', `XA1:${'Z'.repeat(3000)}`, null, undefined]) {
    const got = await verifyCertificate(bad, list);
    assert.equal(got.valid, false);
    assert.equal(got.reason, 'malformed');
  }
  assert.throws(() => base45Decode('a'));
  assert.throws(() => cborDecode(new Uint8Array([0x9f])));
  assert.throws(() => cborDecode(new Uint8Array([0x85, 0x01])));
});
