// The page's pure helpers: ID checks and encoding as the domains expect
// them, formats, and plain-words routes and errors.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  checkId,
  describeRoute,
  encodeIdSegment,
  formatPercent,
  formatRate,
  metadataValue,
  isAbsent,
  plainApiError,
} from '../util.js';

test('archive IDs are checked as the domains check them', () => {
  assert.deepEqual(checkId('  J001-WS·2023-Y-0001 '), { id: 'J001-WS·2023-Y-0001' });
  assert.deepEqual(checkId('档案/2024/001'), { id: '档案/2024/001' });
  assert.deepEqual(checkId('📁-1'), { id: '📁-1' });
  assert.deepEqual(checkId('x'.repeat(256)), { id: 'x'.repeat(256) });
  assert.match(checkId('').error, /enter an archive number/);
  assert.match(checkId('   ').error, /enter an archive number/);
  assert.match(checkId('x'.repeat(257)).error, /too long: 257 bytes/);
  // 86 Chinese characters: 258 bytes although under 257 characters.
  assert.match(checkId('档'.repeat(86)).error, /258 bytes/);
  assert.match(checkId('a\u0007b').error, /control character \(U\+0007\)/);
  assert.match(checkId('a\u0085b').error, /U\+0085/);
  assert.match(checkId('a\ud800').error, /broken character/);
});

test('IDs become one path segment that no URL parser can rewrite', () => {
  assert.equal(encodeIdSegment('.'), '%2E');
  assert.equal(encodeIdSegment('..'), '%2E%2E');
  assert.equal(encodeIdSegment('档案/2024/001'), '%E6%A1%A3%E6%A1%88%2F2024%2F001');
  assert.equal(encodeIdSegment('J001-WS·2023-Y-0001'), 'J001-WS%C2%B72023-Y-0001');
  assert.equal(encodeIdSegment("a b?#%!'()*~_-"), "a%20b%3F%23%25%21%27%28%29%2A~_-");
  for (const id of ['...', 'a.', '.a', 'a/../b', '../x', '档案/2024/001', '📁-1', '100% ? #']) {
    assert.equal(checkId(id).id, id, id);
    const url = new URL(`http://127.0.0.1:7701/v1/archives/${encodeIdSegment(id)}`);
    const segments = url.pathname.split('/');
    assert.equal(segments.length, 4, id);
    assert.equal(decodeURIComponent(segments[3]), id);
  }
  // "." and ".." are dot segments even when escaped: a URL cannot carry
  // them, so they are refused as IDs, here as at every domain.
  for (const id of ['.', '..']) {
    assert.notEqual(new URL(`http://127.0.0.1/v1/archives/${encodeIdSegment(id)}`).pathname, `/v1/archives/${encodeIdSegment(id)}`);
    assert.match(checkId(id).error, /not an archive number/);
    assert.match(checkId(` ${id} `).error, /not an archive number/);
  }
});

test('rates and shares read well', () => {
  assert.equal(formatPercent(0.0012), '0.12 %');
  assert.equal(formatPercent(0.5), '50.0 %');
  assert.equal(formatRate(0.01), '1.0 %');
  assert.equal(formatRate(0.00001), '1 in 100,000');
  assert.equal(formatRate(1.4e-12), '1 in 7.1×10¹¹');
  assert.equal(formatRate(null), '—');
  assert.equal(metadataValue('retention', 'D30'), 'D30 · 30 年 30 years');
  assert.equal(metadataValue('tags', ['a']), '["a"]');
});

test('routes are told in plain words', () => {
  const routed = describeRoute({
    strategy: 'routed', local: false, candidates: ['C'], asked: ['C'], false_positive_hops: 0,
    broadcast: false, probed: [], unreachable: [], remote_calls: 1, elapsed_ms: 1.2,
  }, { served: 'A', owner: 'C', found: true });
  assert.deepEqual(routed, [
    'Domain A checked its own filter and store: not there. 档案域 A检查了自己的过滤器和存储：没有。',
    "Domain A's copies of the other domains' filters pointed to domain C. 档案域 A持有的其他档案域过滤器副本指向档案域 C。",
    'Asked domain C for the record. 向档案域 C 查询该档案。',
    'Found in domain C. 在档案域 C 找到。',
  ]);
  const local = describeRoute({ strategy: 'routed', local: true, candidates: [], asked: [] }, { served: 'A', owner: 'A', found: true });
  assert.match(local[0], /found it in its own store/);
  const fallback = describeRoute({
    strategy: 'routed', local: false, candidates: ['B'], asked: ['B'], false_positive_hops: 1,
    broadcast: true, probed: ['B', 'C'], unreachable: ['C'],
  }, { served: 'A', found: false });
  assert.ok(fallback.some((s) => /false positive/.test(s)));
  assert.ok(fallback.some((s) => /broadcast/.test(s)));
  assert.ok(fallback.some((s) => s === 'Could not reach domain C. 无法连接档案域 C。'));
});

test('errors are in plain words, never a stack trace', () => {
  assert.equal(plainApiError('C', null), 'Domain C could not be reached. Check that it is running. 无法连接档案域 C，请确认其正在运行。');
  assert.match(plainApiError('B', { status: 503, code: 'coordinator_unavailable', message: 'x' }), /cannot accept changes right now/);
  assert.match(plainApiError('B', { status: 413, code: 'content_too_large', message: 'content is 20 bytes; the limit is 10' }), /too large/);
  assert.match(plainApiError('B', { status: 500, code: 'internal', message: 'disk full' }), /internal problem \(HTTP 500\): disk full/);
  assert.match(plainApiError('B', { status: 401, code: 'unauthorized', message: 'a token is required' }), /needs an API token/);
  assert.match(plainApiError('B', { status: 403, code: 'forbidden', message: 'read only' }), /does not allow this/);
  assert.match(plainApiError('B', { status: 429, code: 'rate_limited', message: 'slow down' }), /too many requests/);
});

test('every error code the API documents is told in both languages', () => {
  const codes = ['invalid_json', 'invalid_record', 'invalid_id', 'invalid_key', 'invalid_request',
    'invalid_parameter', 'body_too_large', 'content_too_large', 'insufficient_storage', 'not_found',
    'route_not_found', 'method_not_allowed', 'snapshot_required', 'unavailable', 'not_ready',
    'coordinator_unavailable', 'store_unavailable', 'not_published', 'unauthorized', 'forbidden',
    'rate_limited', 'overloaded', 'timeout', 'internal', 'busy'];
  const cjk = /[\u4e00-\u9fff]/;
  for (const code of codes) {
    const status = code === 'internal' ? 500 : 400;
    const said = plainApiError('B', { status, code, message: 'x' });
    assert.match(said, /[A-Za-z]{4}/, `${code}: ${said}`);
    assert.match(said, cjk, `${code} has no Chinese: ${said}`);
  }
});

test('only the API\'s not_found is an absence, never another 404', () => {
  assert.equal(isAbsent({ status: 404, body: { code: 'not_found' } }), true);
  assert.equal(isAbsent({ status: 404, body: { code: 'route_not_found' } }), false);
  assert.equal(isAbsent({ status: 404, body: null }), false);
  assert.equal(isAbsent({ status: 200, body: { code: 'not_found' } }), false);
});
