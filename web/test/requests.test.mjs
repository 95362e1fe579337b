// The requests' pure helpers (web/requests-model.js): the labels the clerk and reviewer read, when the list stops refreshing, the record IDs typed, what a certificate says and what a code's check answered.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  REQUEST_STATUS,
  VERDICT,
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
  verdictLabel,
} from '../requests-model.js';

const hasChinese = (s) => /[\u4e00-\u9fff]/.test(s);
const hasLatin = (s) => /[A-Za-z]/.test(s);

test('every status and state is labelled in Chinese and English; an unknown one is named as it came', () => {
  for (const s of ['submitted', 'sent', 'answered', 'refused', 'no_records', 'certified']) {
    const text = statusLabel(s);
    assert.ok(hasChinese(text) && hasLatin(text), text);
  }
  for (const s of ['pending', 'in_review', 'released', 'refused', 'none_held']) {
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

test('a request is final once answered, refused, found to have no records or certified; the list refreshes while one is not', () => {
  assert.deepEqual(
    Object.keys(REQUEST_STATUS).filter(isFinal),
    ['answered', 'refused', 'no_records', 'certified'],
  );
  assert.equal(isFinal('lost'), false, 'an unknown status is taken as still moving');
  assert.equal(anyMoving([]), false);
  assert.equal(anyMoving(undefined), false);
  assert.equal(anyMoving([{ status: 'answered' }, { status: 'certified' }]), false);
  assert.equal(anyMoving([{ status: 'answered' }, { status: 'sent' }]), true);
  assert.equal(canCertify({ status: 'answered' }), true);
  assert.equal(canCertify({ status: 'no_records' }), true);
  for (const status of ['submitted', 'sent', 'refused', 'certified']) assert.equal(canCertify({ status }), false, status);
  assert.equal(canCertify(null), false);
  // Not while a copy kept no longer checks.
  const changed = { status: 'answered', holdings: [{ copies: [{ valid: true }, { valid: false }] }] };
  assert.equal(canCertify(changed), false);
});

test('record IDs are read one per line or separated by commas, blanks and repeats left out', () => {
  assert.deepEqual(parseRecordIds(''), []);
  assert.deepEqual(parseRecordIds('  \n '), []);
  assert.deepEqual(parseRecordIds(' M-1 \nM-2,M-3， 档案/2024/001、M-1\r\n'), ['M-1', 'M-2', 'M-3', '档案/2024/001']);
  assert.deepEqual(parseRecordIds('J001-WS·2023-Y-0001'), ['J001-WS·2023-Y-0001']);
});

const certificate = {
  code: 'A.3F2A-9C01-77B4-0E5D-A1C2',
  issued_at: '2026-11-27T08:00:00Z',
  issuer: { domain: 'A', name: '兴义市档案馆', address: '贵州省兴义市', url: 'https://a.example.cn/' },
  sheets: [{ payload: 'XA1:ABC', qr_svg: '<svg/>' }],
  request: {
    id: 'af8b0000000000000000000000000001',
    submitted_at: '2026-11-26T19:13:06Z',
    clerk: 'counter-1',
    status: 'certified',
    applicant_name: '张三',
    purpose: '贷款',
    holdings: [
      {
        domain: 'B',
        name: '黔西南州档案馆',
        records: ['M-1', 'M-9'],
        state: 'released',
        copies: [
          {
            holding: 'B',
            archive_number: 'M-1',
            title: '婚姻登记',
            record_date: '2007-05-01',
            released: '2026-11-26',
            metadata: {},
            content: 'aGVsbG8=',
            valid: true,
          },
        ],
        missing: ['M-9'],
      },
      { domain: 'C', name: '贵州省档案馆', records: ['N-2'], state: 'refused', copies: [], reason: '涉密 classified' },
    ],
    not_found: ['X-404'],
  },
};

test('a certificate names its archive, the applicant, every copy by its holding archive and the record\'s date, and what was not provided', () => {
  const model = certificateModel(certificate);
  assert.equal(model.code, 'A.3F2A-9C01-77B4-0E5D-A1C2');
  assert.equal(model.requestId, certificate.request.id);
  assert.deepEqual(model.issuer, { name: '兴义市档案馆', domain: 'A', address: '贵州省兴义市' });
  assert.equal(model.verifyUrl, 'https://a.example.cn/#verify');
  assert.equal(model.applicantName, '张三');
  assert.equal(model.date, '2026-11-27');
  assert.deepEqual(model.copies, [
    { holding: 'B', holdingName: '黔西南州档案馆', archiveNumber: 'M-1', title: '婚姻登记', recordDate: '2007-05-01' },
  ]);
  assert.deepEqual(
    model.notProvided.map((n) => [n.holding, n.records, n.why]),
    [['黔西南州档案馆', ['M-9'], 'not_held'], ['贵州省档案馆', ['N-2'], 'refused'], [null, ['X-404'], 'held_nowhere']],
  );
  assert.equal(model.notProvided.find((n) => n.why === 'refused').reason, '涉密 classified');
  assert.deepEqual(model.sheets, [{ number: 1, payload: 'XA1:ABC', qrSvg: '<svg/>' }]);
  assert.equal(model.noRecords, false);
  // Nothing of a copy's content or metadata is printed.
  assert.ok(!JSON.stringify(model).includes('aGVsbG8='));
});

test('a certificate with nothing on it says that no record is held; anything else is no certificate', () => {
  const none = { ...certificate, request: { ...certificate.request, holdings: [], not_found: [] } };
  assert.equal(certificateModel(none).noRecords, true);
  for (const bad of [null, {}, { code: 'x' }, { ...certificate, sheets: undefined }]) {
    const model = certificateModel(bad);
    assert.ok(model.error && hasChinese(model.error) && hasLatin(model.error));
  }
});

test('a verification code is read as typed; anything but an archive, a dot and hex digits is refused before asking', () => {
  assert.deepEqual(readCode(' A.3f2a-9c01-77b4-0e5d-a1c2 '), { code: 'A.3f2a-9c01-77b4-0e5d-a1c2' });
  assert.deepEqual(readCode('52-2301.3F2A 9C01 77B4 0E5D A1C2'), { code: '52-2301.3F2A9C0177B40E5DA1C2' });
  assert.deepEqual(readCode('3F2A-9C01-77B4-0E5D-A1C2'), { code: '3F2A-9C01-77B4-0E5D-A1C2' });
  assert.ok(readCode('').error);
  assert.ok(readCode('   ').error);
  assert.ok(readCode('../v1/requests').error);
  assert.ok(readCode('A.3F2A?x=1').error);
  assert.ok(readCode('a/b.3F2A').error);
});

test("a code's check is valid, invalid, not found, unavailable or malformed by the API's answer", () => {
  const check = { code: 'A.3F2A-9C01-77B4-0E5D-A1C2', issuer: { domain: 'A' } };
  assert.deepEqual(checkOutcome({ status: 200, body: check }), { kind: 'valid', check });
  assert.equal(checkOutcome({ status: 422, body: { code: 'certificate_invalid', message: 'x' } }).kind, 'invalid');
  assert.equal(checkOutcome({ status: 404, body: { code: 'certificate_not_found', message: 'x' } }).kind, 'not_found');
  assert.equal(checkOutcome({ status: 400, body: { code: 'invalid_request', message: 'x' } }).kind, 'malformed');
  assert.equal(checkOutcome({ status: 503, body: { code: 'unavailable', message: 'x' } }).kind, 'unavailable');
  // A 404 of another kind (a wrong route) is not "not found".
  assert.equal(checkOutcome({ status: 404, body: { code: 'route_not_found' } }).kind, 'error');
  assert.equal(checkOutcome({ status: 503, body: null }).kind, 'error');
});

test("every verdict of a payload's check is said in both languages", () => {
  for (const reason of ['valid', 'changed', 'unknown_key', 'key_not_valid', 'mismatch', 'malformed']) {
    const label = verdictLabel(reason);
    assert.ok(hasChinese(label) && hasLatin(label), label);
    assert.ok(hasChinese(VERDICT[reason].says) && hasLatin(VERDICT[reason].says), reason);
  }
  assert.match(verdictLabel('odd'), /Unknown \(odd\)/);
});
