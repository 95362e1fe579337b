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
  refused: { zh: '已拒绝', en: 'Refused', final: true, tone: 'bad' },
  certified: { zh: '已出证', en: 'Certified', final: true, tone: 'ok' },
};

/** A holding archive's state (HoldingState). */
export const HOLDING_STATE = {
  pending: { zh: '待处理', en: 'Pending', tone: 'pending' },
  in_review: { zh: '审核中', en: 'In review', tone: 'pending' },
  released: { zh: '已提供', en: 'Released', tone: 'ok' },
  refused: { zh: '已拒绝', en: 'Refused', tone: 'bad' },
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
 * refused or certified. An unknown status is taken as still moving.
 */
export function isFinal(status) {
  return REQUEST_STATUS[status]?.final === true;
}

/** Whether any of `requests` is still waiting for a holding archive (the list is then refreshed). */
export function anyMoving(requests) {
  return (requests ?? []).some((r) => !isFinal(r.status));
}

/** Whether the clerk may issue this request's certificate now. */
export function canCertify(request) {
  return request?.status === 'answered';
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

/**
 * What a certified request's certificate says: the request and applicant,
 * every copy received (holding archive, archive number, title, date,
 * verification code), and what was not provided and why. `receiving` is
 * the archive that issued it (the one serving the page). Returns
 * `{ error }` for a request that is not certified.
 */
export function certificateModel(request, receiving) {
  if (!request || request.status !== 'certified') {
    return { error: 'Only a certified request has a certificate. 仅已出证的申请有查询证明。' };
  }
  const copies = [];
  const notProvided = [];
  for (const holding of request.holdings ?? []) {
    for (const c of holding.copies ?? []) {
      copies.push({
        holding: c.holding ?? holding.domain,
        archiveNumber: c.archive_number,
        title: c.title,
        date: c.date,
        code: c.code,
      });
    }
    if (holding.state === 'refused') {
      notProvided.push({ holding: holding.domain, records: holding.records ?? [], reason: holding.reason ?? '' });
    }
    for (const id of holding.missing ?? []) {
      notProvided.push({ holding: holding.domain, records: [id], reason: 'not held 未持有' });
    }
  }
  for (const id of request.not_found ?? []) {
    notProvided.push({ holding: null, records: [id], reason: 'held by no archive 各档案馆均未持有' });
  }
  return {
    requestId: request.id,
    receiving: receiving ?? null,
    clerk: request.clerk ?? null,
    applicantName: request.applicant_name,
    purpose: request.purpose,
    submittedAt: request.submitted_at,
    certifiedAt: request.certified_at ?? null,
    /** The certificate's date: the day it was issued (UTC, as the API writes it). */
    date: (request.certified_at ?? '').slice(0, 10) || null,
    copies,
    notProvided,
  };
}

/**
 * A verification code as typed, ready for the check's URL: spaces taken
 * out (the domains ignore case and dashes themselves); `{ error }` when
 * nothing is left or it cannot be a code (anything but hex digits and dashes).
 */
export function readCode(typed) {
  const code = String(typed ?? '').replace(/\s+/g, '');
  if (!code) return { error: 'Enter a verification code. 请输入核验码。' };
  if (!/^[0-9A-Fa-f-]+$/.test(code)) {
    return { error: 'A verification code is 20 hex digits in groups of four: XXXX-XXXX-XXXX-XXXX-XXXX. 核验码为 20 位十六进制数字，四位一组。' };
  }
  return { code };
}

/**
 * What a check of a verification code (GET /v1/certificates/{code})
 * answered: `{ kind, check? }`, `kind` one of `valid`, `invalid`,
 * `not_found`, `malformed`, or `error` (anything else: the caller words it).
 */
export function checkOutcome(answer) {
  const code = answer?.body?.code;
  if (answer?.status === 200 && answer.body) return { kind: 'valid', check: answer.body };
  if (answer?.status === 422 && code === 'certificate_invalid') return { kind: 'invalid' };
  if (answer?.status === 404 && code === 'certificate_not_found') return { kind: 'not_found' };
  if (answer?.status === 400 && code === 'invalid_request') return { kind: 'malformed' };
  return { kind: 'error' };
}
