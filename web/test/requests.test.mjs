// The requests' pure helpers (web/requests-model.js): the labels the clerk and reviewer read, when the list stops refreshing, the record IDs typed, what a certificate says and what a code's check answered.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  REQUEST_STATUS,
  anyMoving,
  canCertify,
  certificateModel,
  checkOutcome,
  holdingLabel,
  isFinal,
  parseRecordIds,
  readCode,
  statusLabel,
  tone,
} from '../requests-model.js';

const hasChinese = (s) => /[\u4e00-\u9fff]/.test(s);
const hasLatin = (s) => /[A-Za-z]/.test(s);

test('every status and state is labelled in Chinese and English; an unknown one is named as it came', () => {
  for (const s of ['submitted', 'sent', 'answered', 'refused', 'certified']) {
    const text = statusLabel(s);
    assert.ok(hasChinese(text) && hasLatin(text), text);
  }
  for (const s of ['pending', 'in_review', 'released', 'refused']) {
    const text = holdingLabel(s);
    assert.ok(hasChinese(text) && hasLatin(text), text);
  }
  assert.equal(statusLabel('answered'), '已答复 Answered');
  assert.equal(holdingLabel('in_review'), '审核中 In review');
  assert.match(statusLabel('lost'), /Unknown \(lost\)/);
  assert.equal(tone('certified'), 'ok');
  assert.equal(tone('refused'), 'bad');
  assert.equal(tone('in_review'), 'pending');
  assert.equal(tone('lost'), 'pending');
});

test('a request is final once answered, refused or certified; the list refreshes while one is not', () => {
  assert.deepEqual(
    Object.keys(REQUEST_STATUS).filter(isFinal),
    ['answered', 'refused', 'certified'],
  );
  assert.equal(isFinal('lost'), false, 'an unknown status is taken as still moving');
  assert.equal(anyMoving([]), false);
  assert.equal(anyMoving(undefined), false);
  assert.equal(anyMoving([{ status: 'answered' }, { status: 'certified' }]), false);
  assert.equal(anyMoving([{ status: 'answered' }, { status: 'sent' }]), true);
  assert.equal(canCertify({ status: 'answered' }), true);
  for (const status of ['submitted', 'sent', 'refused', 'certified']) assert.equal(canCertify({ status }), false, status);
  assert.equal(canCertify(null), false);
});

test('record IDs are read one per line or separated by commas, blanks and repeats left out', () => {
  assert.deepEqual(parseRecordIds(''), []);
  assert.deepEqual(parseRecordIds('  \n '), []);
  assert.deepEqual(parseRecordIds(' M-1 \nM-2,M-3， 档案/2024/001、M-1\r\n'), ['M-1', 'M-2', 'M-3', '档案/2024/001']);
  assert.deepEqual(parseRecordIds('J001-WS·2023-Y-0001'), ['J001-WS·2023-Y-0001']);
});

const certified = {
  id: 'af8b0000000000000000000000000001',
  submitted_at: '2026-11-26T19:13:06Z',
  clerk: 'counter-1',
  status: 'certified',
  certified_at: '2026-11-27T08:00:00Z',
  applicant_name: '张三',
  purpose: '贷款',
  holdings: [
    {
      domain: 'B',
      records: ['M-1', 'M-9'],
      state: 'released',
      copies: [
        {
          code: '3F2A-9C01-77B4-0E5D-A1C2',
          holding: 'B',
          archive_number: 'M-1',
          request_id: 'af8b0000000000000000000000000001',
          date: '2026-11-26',
          title: '婚姻登记',
          metadata: {},
          content: 'aGVsbG8=',
        },
      ],
      missing: ['M-9'],
    },
    { domain: 'C', records: ['N-2'], state: 'refused', copies: [], reason: '涉密 classified' },
  ],
  not_found: ['X-404'],
};

test('a certificate names the request, the applicant and every copy with its code, and what was not provided', () => {
  const model = certificateModel(certified, 'A');
  assert.equal(model.requestId, certified.id);
  assert.equal(model.receiving, 'A');
  assert.equal(model.applicantName, '张三');
  assert.equal(model.purpose, '贷款');
  assert.equal(model.date, '2026-11-27');
  assert.equal(model.clerk, 'counter-1');
  assert.deepEqual(model.copies, [
    { holding: 'B', archiveNumber: 'M-1', title: '婚姻登记', date: '2026-11-26', code: '3F2A-9C01-77B4-0E5D-A1C2' },
  ]);
  assert.deepEqual(
    model.notProvided.map((n) => [n.holding, n.records]),
    [['B', ['M-9']], ['C', ['N-2']], [null, ['X-404']]],
  );
  assert.equal(model.notProvided.find((n) => n.holding === 'C').reason, '涉密 classified');
  // Nothing of a copy's content or metadata is printed.
  assert.ok(!JSON.stringify(model).includes('aGVsbG8='));
});

test('only a certified request has a certificate', () => {
  for (const status of ['submitted', 'sent', 'answered', 'refused']) {
    const model = certificateModel({ ...certified, status }, 'A');
    assert.ok(model.error && hasChinese(model.error) && hasLatin(model.error), status);
  }
  assert.ok(certificateModel(null, 'A').error);
});

test('a verification code is read as typed; anything but hex digits and dashes is refused before asking', () => {
  assert.deepEqual(readCode(' 3f2a-9c01-77b4-0e5d-a1c2 '), { code: '3f2a-9c01-77b4-0e5d-a1c2' });
  assert.deepEqual(readCode('3F2A 9C01 77B4 0E5D A1C2'), { code: '3F2A9C0177B40E5DA1C2' });
  assert.ok(readCode('').error);
  assert.ok(readCode('   ').error);
  assert.ok(readCode('../v1/requests').error);
  assert.ok(readCode('3F2A?x=1').error);
});

test("a code's check is valid, invalid, not found or malformed by the API's answer", () => {
  const check = { code: '3F2A-9C01-77B4-0E5D-A1C2', holding: 'B', receiving: 'A' };
  assert.deepEqual(checkOutcome({ status: 200, body: check }), { kind: 'valid', check });
  assert.equal(checkOutcome({ status: 422, body: { code: 'certificate_invalid', message: 'x' } }).kind, 'invalid');
  assert.equal(checkOutcome({ status: 404, body: { code: 'certificate_not_found', message: 'x' } }).kind, 'not_found');
  assert.equal(checkOutcome({ status: 400, body: { code: 'invalid_request', message: 'x' } }).kind, 'malformed');
  // A 404 of another kind (a wrong route) is not "not found".
  assert.equal(checkOutcome({ status: 404, body: { code: 'route_not_found' } }).kind, 'error');
  assert.equal(checkOutcome({ status: 503, body: null }).kind, 'error');
});
