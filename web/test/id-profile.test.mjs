// Archive numbers as people type them: the page reads every shared
// vector as the domains do (crates/node/src/local/id_profile.rs reads the
// same file), and tries the form typed after the normalised one.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import { idForms, normaliseId } from '../util.js';

const vectors = JSON.parse(readFileSync(new URL('./id-profile-vectors.json', import.meta.url), 'utf8'));

test('every shared vector reads as the domains read it', () => {
  assert.ok(vectors.length >= 10);
  for (const v of vectors) {
    assert.equal(normaliseId(v.typed, { separator: '·' }), v.normalised, `${JSON.stringify(v.typed)}: ${v.why}`);
  }
});

test('an ASCII dot is tried as the separator first, then as typed', () => {
  assert.deepEqual(idForms('J201-CW.2010-Y-00042', { separator: '·' }), ['J201-CW·2010-Y-00042', 'J201-CW.2010-Y-00042']);
  assert.deepEqual(idForms('J201-CW·2010-Y-00042', { separator: '·' }), ['J201-CW·2010-Y-00042']);
  assert.deepEqual(idForms('J201-CW.2010', { separator: '' }), ['J201-CW.2010']);
});

test('reading a normalised form again leaves it as it is', () => {
  for (const v of vectors) {
    const once = normaliseId(v.typed);
    assert.equal(normaliseId(once), once);
  }
});
