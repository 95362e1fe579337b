// The words and shapes of cross-archive requests for the page, kept pure (no DOM) so that they are tested on their own:
// status and state labels, which requests are still moving, the record IDs
// a clerk types, what a certified request's certificate says, and what a
// verification code's check answered. Tested by web/test/requests.test.mjs.
//
// Nothing here ever sees an applicant's identity number: the API never
// returns it, and the form sends it without passing it through here.

/** A request's status (RequestStatus): its label and whether it can still change by itself. */
export const REQUEST_STATUS = {
  submitted: { zh: '已登记', en: 'Submitted', final: false, tone: 'pending' },
  sent: { zh: '已发往馆藏档案馆', en: 'Sent to the holding archives', final: false, tone: 'pending' },
  answered: { zh: '已答复', en: 'Answered', final: true, tone: 'ok' },
  refused: { zh: '馆藏档案馆拒绝提供', en: 'Refused by the holding archive', final: true, tone: 'bad' },
  no_records: { zh: '查无档案记录', en: 'No records', final: true, tone: 'ok' },
  certified: { zh: '已出证', en: 'Certified', final: true, tone: 'ok' },
};

/** A holding archive's state (HoldingState). */
export const HOLDING_STATE = {
  pending: { zh: '待处理', en: 'Pending', tone: 'pending' },
  in_review: { zh: '审核中', en: 'In review', tone: 'pending' },
  released: { zh: '已提供', en: 'Released', tone: 'ok' },
  refused: { zh: '已拒绝', en: 'Refused', tone: 'bad' },
  none_held: { zh: '该馆未保存', en: 'None held there', tone: 'ok' },
};

function label(table, value) {
  const known = table[value];
  return known ? `${known.zh} ${known.en}` : `未知 Unknown (${value})`;
}

/** "已答复 Answered" for a request's status; an unknown one is named as it came. */
export function statusLabel(status) {
  return label(REQUEST_STATUS, status);
}

/** "审核中 In review" for a holding archive's state. */
export function holdingLabel(state) {
  return label(HOLDING_STATE, state);
}

/** The tone a status or state is drawn in: `pending`, `ok` or `bad` (unknown: `pending`). */
export function tone(statusOrState) {
  return (REQUEST_STATUS[statusOrState] ?? HOLDING_STATE[statusOrState])?.tone ?? 'pending';
}

/**
 * Whether a request's status no longer changes without the clerk: answered,
 * refused, no records or certified. An unknown status is taken as still moving.
 */
export function isFinal(status) {
  return REQUEST_STATUS[status]?.final === true;
}

/** Whether any of `requests` is still waiting for a holding archive (the list is then refreshed). */
export function anyMoving(requests) {
  return (requests ?? []).some((r) => !isFinal(r.status));
}

/** Whether the clerk may issue this request's certificate now: every holding archive answered (with copies, or holding none), and every copy kept still checks. */
export function canCertify(request) {
  const copies = (request?.holdings ?? []).flatMap((h) => h.copies ?? []);
  return ['answered', 'no_records'].includes(request?.status) && copies.every((c) => c.valid !== false);
}

/**
 * The record IDs a clerk typed: one per line, or separated by commas
 * (ASCII or full-width) or 、; spaces at either end taken off, blanks and
 * repeats left out, the order kept.
 */
export function parseRecordIds(text) {
  const seen = new Set();
  for (const part of String(text ?? '').split(/[\n\r,，、;；]+/)) {
    const id = part.trim();
    if (id) seen.add(id);
  }
  return [...seen];
}

/** What each reason of a certificate's "not provided" says. */
const NOT_PROVIDED = {
  refused: '拒绝提供 Refused',
  not_held: '该馆未保存 Not held there',
  held_nowhere: '各档案馆均未保存 Held by no archive',
};

/** A reason of "not provided" in both languages (an unknown one as it came). */
export function notProvidedLabel(why) {
  return NOT_PROVIDED[why] ?? why;
}

/**
 * What a certificate (the API's `Certificate`) says, to draw and print:
 * the issuing archive by its name and address, the code, the applicant,
 * every copy (holding archive by name, archive number, title, the record's
 * own date), what was not provided and why, and each sheet's payload and
 * QR code. Returns `{ error }` for anything else.
 */
export function certificateModel(certificate) {
  const request = certificate?.request;
  if (!certificate?.code || !request || !Array.isArray(certificate.sheets)) {
    return { error: 'Only a certified request has a certificate. 仅已出证的申请有查询证明。' };
  }
  const copies = [];
  const notProvided = [];
  for (const holding of request.holdings ?? []) {
    for (const c of holding.copies ?? []) {
      copies.push({
        holding: c.holding ?? holding.domain,
        holdingName: holding.name ?? holding.domain,
        archiveNumber: c.archive_number,
        title: c.title,
        recordDate: c.record_date ?? null,
      });
    }
    if (holding.state === 'refused') {
      notProvided.push({ holding: holding.name ?? holding.domain, records: holding.records ?? [], why: 'refused', reason: holding.reason ?? '' });
    } else if (holding.missing?.length) {
      notProvided.push({ holding: holding.name ?? holding.domain, records: holding.missing, why: 'not_held', reason: '' });
    }
  }
  if (request.not_found?.length) notProvided.push({ holding: null, records: request.not_found, why: 'held_nowhere', reason: '' });
  const issuer = certificate.issuer ?? {};
  const url = (issuer.url ?? '').replace(/\/+$/, '');
  return {
    code: certificate.code,
    requestId: request.id,
    issuer: { name: issuer.name ?? issuer.domain ?? '—', domain: issuer.domain ?? '', address: issuer.address ?? '' },
    verifyUrl: url ? `${url}/#verify` : null,
    clerk: request.clerk ?? null,
    applicantName: request.applicant_name,
    purpose: request.purpose,
    searchedBy: request.searched_by ?? null,
    issuedAt: certificate.issued_at,
    /** The certificate's date: the day it was issued (UTC, as the API writes it). */
    date: (certificate.issued_at ?? '').slice(0, 10) || null,
    noRecords: copies.length === 0 && notProvided.length === 0,
    copies,
    notProvided,
    sheets: certificate.sheets.map((sheet, i) => ({ number: i + 1, payload: sheet.payload, qrSvg: sheet.qr_svg })),
  };
}

/**
 * A verification code as typed, ready for the check's URL: spaces taken
 * out (the domains ignore case and dashes themselves); `{ error }` when
 * nothing is left or it cannot be a code: the issuing archive, a dot and
 * the hex digits (`A.XXXX-XXXX-XXXX-XXXX-XXXX`), or the bare hex digits of
 * a code printed before certificates named their archive.
 */
export function readCode(typed) {
  const code = String(typed ?? '').replace(/\s+/g, '');
  if (!code) return { error: 'Enter a verification code. 请输入核验码。' };
  if (!/^([A-Za-z0-9_-]{1,64}\.)?[0-9A-Fa-f-]+$/.test(code)) {
    return { error: 'A verification code is its archive, a dot and 20 hex digits in groups of four: ARCHIVE.XXXX-XXXX-XXXX-XXXX-XXXX. 核验码为出证档案馆代码、圆点和 20 位十六进制数字。' };
  }
  return { code };
}

/**
 * What a check of a verification code (GET /v1/certificates/{code})
 * answered: `{ kind, check? }`, `kind` one of `valid`, `invalid`,
 * `not_found`, `malformed`, `unavailable`, or `error` (anything else: the
 * caller words it).
 */
export function checkOutcome(answer) {
  const code = answer?.body?.code;
  if (answer?.status === 200 && answer.body) return { kind: 'valid', check: answer.body };
  if (answer?.status === 422 && code === 'certificate_invalid') return { kind: 'invalid' };
  if (answer?.status === 404 && code === 'certificate_not_found') return { kind: 'not_found' };
  if (answer?.status === 400 && code === 'invalid_request') return { kind: 'malformed' };
  if (answer?.status === 503 && code === 'unavailable') return { kind: 'unavailable' };
  return { kind: 'error' };
}

/** What a check of a payload in the browser found (seal.js's `reason`), in both languages. */
export const VERDICT = {
  valid: { zh: '有效', en: 'Valid', tone: 'ok', says: '各印章均与内容一致。 Every seal matches what it seals.' },
  changed: { zh: '已被改动', en: 'Changed', tone: 'bad', says: '内容在盖章后被改动，证明不可信。 It was changed after it was sealed: do not rely on it.' },
  unknown_key: { zh: '印章未知', en: 'Unknown seal', tone: 'bad', says: '印章不在本集群的信任列表中：非本集群出具，或列表已过期。 Sealed by a key this cluster’s trust list does not hold.' },
  key_not_valid: { zh: '印章已失效', en: 'Seal not valid', tone: 'bad', says: '印章密钥已吊销或在该日期无效。 Sealed by a key revoked, or not valid on that date.' },
  mismatch: { zh: '内容不符', en: 'Does not belong together', tone: 'bad', says: '其中的复制件不属于这份证明。 A copy on it was sealed for another certificate.' },
  malformed: { zh: '无法读取', en: 'Not a certificate', tone: 'bad', says: '不是完整的证明二维码内容（被截断或输错）。 Not a certificate’s payload: cut short, or mistyped.' },
};

/** A payload's verdict in both languages (an unknown one named as it came). */
export function verdictLabel(reason) {
  const known = VERDICT[reason];
  return known ? `${known.zh} ${known.en}` : `未知 Unknown (${reason})`;
}
