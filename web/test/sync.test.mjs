// syncFilter against a stand-in domain (node:http on a loopback port)
// serving the vectors' bytes: snapshot first, then deltas, a snapshot again
// on 409 or on a delta that does not fit, and plain errors for a domain
// that is down, answers an error, or sends damaged bytes (which are never
// used).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { readFileSync } from 'node:fs';

import { BloomFilter, DomainRequestError, FilterFormatError, syncFilter } from '../xarchive-filter.js';

const vectors = JSON.parse(readFileSync(new URL('./vectors.json', import.meta.url), 'utf8'));
const bytes = (b64) => Buffer.from(b64, 'base64');
const same = (a, b) => Buffer.from(a).equals(Buffer.from(b));

const v0to2 = vectors.deltas.find((d) => d.name === 'bit view: v0 to v2');
const otherEpoch = vectors.deltas.find((d) => d.name === 'refused: delta of another epoch');

/** What the stand-in domain answers next, and the requests it saw. */
const domain = { snapshot: null, delta: null, deltaStatus: 200, seen: [] };
let server;
let base;

before(async () => {
  server = createServer((req, res) => {
    domain.seen.push(req.url);
    const url = new URL(req.url, 'http://x');
    if (url.pathname === '/v1/filter') {
      if (typeof domain.snapshot === 'number') {
        res.writeHead(domain.snapshot, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ code: 'internal', message: 'the store is closed' }));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      res.end(domain.snapshot);
    } else if (url.pathname === '/v1/filter/delta') {
      if (domain.deltaStatus !== 200) {
        res.writeHead(domain.deltaStatus, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ code: 'snapshot_required', message: 'the filter was rebuilt' }));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      res.end(domain.delta);
    } else {
      res.writeHead(404);
      res.end();
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${server.address().port}/`;
});

after(() => new Promise((resolve) => server.close(resolve)));

test('first a snapshot, then the delta since the copy\'s version', async () => {
  domain.snapshot = bytes(v0to2.base);
  domain.seen = [];
  const first = await syncFilter(base, null);
  assert.equal(first.how, 'snapshot');
  assert.ok(first.filter instanceof BloomFilter);
  assert.ok(same(first.filter.encode(), bytes(v0to2.base)));

  domain.delta = bytes(v0to2.delta);
  const second = await syncFilter(base, first.filter);
  assert.equal(second.how, 'delta');
  assert.equal(second.filter, first.filter, 'the copy is brought forward in place');
  assert.equal(second.changes, v0to2.fields.changes.length);
  assert.ok(same(second.filter.encode(), bytes(v0to2.result)));
  assert.deepEqual(domain.seen, [
    '/v1/filter',
    `/v1/filter/delta?epoch=${v0to2.fields.epoch}&since=${v0to2.fields.from_version}`,
  ]);
});

test('409 snapshot_required: the snapshot is taken instead', async () => {
  domain.snapshot = bytes(v0to2.base);
  const { filter } = await syncFilter(base, null);
  domain.deltaStatus = 409;
  domain.snapshot = bytes(v0to2.result);
  try {
    const again = await syncFilter(base, filter);
    assert.equal(again.how, 'snapshot');
    assert.ok(same(again.filter.encode(), bytes(v0to2.result)));
  } finally {
    domain.deltaStatus = 200;
  }
});

test('a delta that does not fit the copy (another epoch) leads to a snapshot', async () => {
  domain.snapshot = bytes(otherEpoch.base);
  const { filter } = await syncFilter(base, null);
  domain.delta = bytes(otherEpoch.delta);
  domain.snapshot = bytes(v0to2.result);
  const again = await syncFilter(base, filter);
  assert.equal(again.how, 'snapshot');
  assert.ok(same(filter.encode(), bytes(otherEpoch.base)), 'the refused delta changed nothing');
});

test('damaged bytes are refused and the copy is left as it was', async () => {
  domain.snapshot = bytes(v0to2.base);
  const { filter } = await syncFilter(base, null);
  const damaged = bytes(v0to2.delta);
  damaged[damaged.length - 10] ^= 0x04;
  domain.delta = damaged;
  await assert.rejects(syncFilter(base, filter), (e) => e instanceof FilterFormatError && e.kind === 'checksum');
  assert.ok(same(filter.encode(), bytes(v0to2.base)));

  domain.snapshot = Buffer.from('<html>a proxy error page</html>');
  await assert.rejects(syncFilter(base, null), (e) => e instanceof FilterFormatError && e.kind === 'magic');
});

test('a domain that answers an error or cannot be reached gives a plain error', async () => {
  domain.snapshot = 500;
  await assert.rejects(syncFilter(base, null), (e) => {
    assert.ok(e instanceof DomainRequestError);
    assert.equal(e.status, 500);
    assert.equal(e.code, 'internal');
    assert.match(e.message, /answered HTTP 500: the store is closed/);
    return true;
  });
  // A port nothing listens on: bind one, note it, close it.
  const probe = createServer();
  await new Promise((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const port = probe.address().port;
  await new Promise((resolve) => probe.close(resolve));
  await assert.rejects(syncFilter(`http://127.0.0.1:${port}`, null), (e) => {
    assert.ok(e instanceof DomainRequestError);
    assert.equal(e.status, 0);
    assert.match(e.message, /could not be reached/);
    return true;
  });
});
