// The receiving clerk's view of cross-archive requests: the form that registers one, and the list of requests with each holding archive's answer.
//
// Requests go to the serving domain (the receiving archive) and need a
// token with the `clerk` role (api.js sends it). The applicant's identity
// number is sent in the POST body only: it is read from a field with no
// `name` (so no form submission could carry it), never kept, never logged,
// and the field is emptied once the request is registered; the API never
// sends it back. The list is read again while any request still waits for
// a holding archive.

import { plainApiError } from './util.js';
import {
  anyMoving,
  canCertify,
  holdingLabel,
  parseRecordIds,
  statusLabel,
  tone,
} from './requests-model.js';
import { $, h, show } from './dom.js';
import { apiError, callApi, readView } from './api.js';
import { state } from './cluster.js';
import { openCertificate } from './certificate.js';

/** How often the list is read again while a request is still moving. */
const REFRESH_MS = 2000;

let timer = null;
/** Counts the reads of the list: only the latest one draws it and sets the next. */
let generation = 0;

/** A pill with a status's or state's label. */
function pill(value, text) {
  return h('span', { class: `pill state-${tone(value)}`, 'data-value': value }, text);
}

/** Where the clerk's errors are said: `code` words for the errors of these routes. */
function requestError(answer) {
  const err = apiError(answer);
  const served = state.served ?? '?';
  switch (err.code) {
    case 'unauthorized':
    case 'forbidden':
      return 'Requests need a token with the clerk role: enter one at the top of the page. 办理查档申请需要具有办事员（clerk）权限的令牌，请在页面顶部输入。';
    case 'invalid_key':
      return `The identity number is not valid${err.message ? `: ${err.message}` : ''}. 证件号码无效（号码本身不会被显示）。`;
    case 'invalid_request':
      return `The request was refused: ${err.message}. 申请内容有误。`;
    case 'not_answered':
      return 'Not every holding archive has answered yet, so no certificate can be issued. 尚有馆藏档案馆未答复，暂不能出证。';
    case 'copy_invalid':
      return `A copy kept here no longer checks against its holding archive's seal, so no certificate is issued: ${err.message}. 有复制件与馆藏档案馆的印章不符，不能出证。`;
    case 'certificate_not_found':
      return 'No certificate is issued for this request yet. 该申请尚未出证。';
    case 'request_not_found':
      return `Domain ${served} has no such request. 无此申请。`;
    case 'unavailable':
      return `An archive that may hold a record could not be asked, so nothing was registered; try again shortly. 有档案馆暂时无法连接，申请未登记，请稍后再试。${err.message ? ` (${err.message})` : ''}`;
    default:
      return plainApiError(served, err);
  }
}

/** One copy received, marked when it no longer checks against its seal. */
function renderCopy(c) {
  return h(
    'li',
    { class: c.valid === false ? 'copy invalid' : 'copy', 'data-record': c.archive_number, 'data-valid': String(c.valid !== false) },
    h('code', {}, c.archive_number),
    ' ',
    c.title,
    c.record_date ? h('span', { class: 'muted' }, ` · ${c.record_date}`) : null,
    c.valid === false
      ? h('div', { class: 'warn', role: 'alert' }, `✗ 该复制件与馆藏档案馆的印章不符，不能出证 This copy no longer checks against its holding archive's seal; no certificate can be issued: ${c.problem ?? ''}`)
      : null,
  );
}

/**
 * The holding archives a request still waits for: counted, not named (an
 * archive is named, with its records, once it answers).
 */
function renderAwaiting(awaiting) {
  if (!awaiting?.archives) return null;
  const n = awaiting.archives;
  const review = awaiting.in_review ? `，其中 ${awaiting.in_review} 个在审核中` : '';
  const reviewEn = awaiting.in_review ? `, ${awaiting.in_review} in review` : '';
  return h(
    'div',
    { class: 'awaiting small', 'data-awaiting': String(awaiting.archives) },
    `等待 ${n} 个档案馆答复${review}（答复后显示馆名与档案） Awaiting ${n} archive${n === 1 ? '' : 's'}${reviewEn} (each is named, with its records, once it answers)`,
    awaiting.unreachable_since
      ? h('div', { class: 'warn' }, `其中一馆自 ${awaiting.unreachable_since} 起无法连接 One of them cannot be reached since ${awaiting.unreachable_since}`)
      : null,
  );
}

/** One request: its status and what to tell the applicant, each holding archive's state, reason and copies, and what the clerk can do with it. */
function renderRequest(r) {
  const holdings = (r.holdings ?? []).map((hd) =>
    h(
      'li',
      { class: 'holding', 'data-domain': hd.domain, 'data-state': hd.state },
      h('strong', {}, hd.name ?? hd.domain),
      h('span', { class: 'muted small' }, ` (${hd.domain}) `),
      pill(hd.state, holdingLabel(hd.state)),
      ' ',
      h('span', { class: 'muted small' }, (hd.records ?? []).join(', ')),
      hd.reason ? h('div', { class: 'reason small' }, `理由 Reason: ${hd.reason}`) : null,
      hd.missing?.length ? h('div', { class: 'small warn' }, `未持有 Not held there: ${hd.missing.join(', ')}`) : null,
      hd.copies?.length ? h('ul', { class: 'copies small' }, hd.copies.map(renderCopy)) : null,
    ),
  );
  const actions = [];
  if (canCertify(r)) {
    actions.push(h('button', { type: 'button', class: 'certify', onclick: (ev) => certify(r.id, ev.currentTarget) }, '出具证明 Issue certificate'));
  }
  if (r.status === 'certified') {
    actions.push(h('button', { type: 'button', class: 'secondary view-certificate', onclick: () => viewCertificate(r.id) }, '查看证明 View certificate'));
  }
  return h(
    'li',
    { class: 'request', 'data-request': r.id, 'data-status': r.status },
    h(
      'div',
      { class: 'request-head' },
      h('strong', {}, r.applicant_name),
      h('span', { class: 'muted' }, ` · ${r.purpose} · `),
      pill(r.status, statusLabel(r.status)),
    ),
    r.words ? h('p', { class: 'words small' }, `${r.words.zh} ${r.words.en}`) : null,
    h(
      'div',
      { class: 'muted small' },
      `申请编号 Request `,
      h('code', {}, r.id),
      ` · 登记于 submitted ${r.submitted_at}`,
      r.certificate ? ` · 出证于 certified ${r.certificate.issued_at} · 核验码 code ${r.certificate.code}` : '',
    ),
    holdings.length ? h('ul', { class: 'holdings' }, holdings) : null,
    renderAwaiting(r.awaiting),
    r.not_found?.length ? h('p', { class: 'small warn' }, `各档案馆均未持有 Held by no archive: ${r.not_found.join(', ')}`) : null,
    actions.length ? h('div', { class: 'row' }, actions) : null,
  );
}

/** Reads a certified request's certificate (GET /v1/requests/{id}/certificate) and shows it. */
async function viewCertificate(id) {
  const out = $('request-result');
  let answer;
  try {
    answer = await callApi('', `/v1/requests/${encodeURIComponent(id)}/certificate`);
  } catch (e) {
    show(out, h('div', { class: 'card error', role: 'alert' }, plainApiError(state.served ?? '?', e)));
    return;
  }
  if (answer.status !== 200 || !answer.body) {
    show(out, h('div', { class: 'card error', role: 'alert' }, requestError(answer)));
    return;
  }
  openCertificate(answer.body);
}

/** Reads the list of requests (GET /v1/requests) and draws it; reads it again while one is still moving. */
export async function loadRequests({ quiet = true } = {}) {
  clearTimeout(timer);
  timer = null;
  const mine = ++generation;
  const out = $('requests-list');
  const body = await readView(out, '/v1/requests', {
    quiet,
    served: state.served ?? '?',
    describe: requestError,
    stale: () => mine !== generation,
  });
  if (!body) return;
  const requests = body.requests ?? [];
  show(
    out,
    requests.length
      ? h('ol', { class: 'requests' }, requests.map(renderRequest))
      : h('p', { class: 'muted' }, 'No requests registered here yet. 本档案馆尚无查档申请。'),
  );
  if (anyMoving(requests)) {
    timer = setTimeout(() => {
      if (document.visibilityState === 'visible') loadRequests();
      else timer = setTimeout(() => loadRequests(), REFRESH_MS);
    }, REFRESH_MS);
  }
}

/** The request form: registers the request (POST /v1/requests) and shows it. */
export async function submitRequest(form) {
  const out = $('request-result');
  const say = (cls, ...text) => show(out, h('div', { class: `card ${cls}`, role: cls === 'error' ? 'alert' : null }, ...text));
  const idField = $('request-applicant-id');
  const applicantName = form.applicant_name.value.trim();
  const purpose = form.purpose.value.trim();
  const records = parseRecordIds(form.records.value);
  if (!idField.value.trim()) return say('error', "Enter the applicant's identity number. 请输入申请人的证件号码。");
  if (!applicantName) return say('error', "Enter the applicant's name. 请输入申请人姓名。");
  if (!purpose) return say('error', 'Enter the purpose of the request. 请输入查档用途。');
  say('pending', 'Registering the request… 正在登记申请…');
  let answer;
  try {
    answer = await callApi('', '/v1/requests', {
      method: 'POST',
      body: {
        applicant_id: idField.value.trim(),
        applicant_name: applicantName,
        purpose,
        ...(records.length ? { records } : {}),
      },
    });
  } catch (e) {
    return say('error', plainApiError(state.served ?? '?', e));
  }
  if (answer.status !== 201 || !answer.body) return say('error', requestError(answer));
  // Registered: the identity number is not kept on the page.
  idField.value = '';
  form.reset();
  say('success', h('p', {}, 'Request registered. 申请已登记。'), h('ol', { class: 'requests' }, renderRequest(answer.body)));
  await loadRequests();
}

/** Issues a certificate (POST /v1/requests/{id}/certificate), then shows it. */
async function certify(id, button) {
  const out = $('request-result');
  if (button) button.disabled = true;
  let answer;
  try {
    answer = await callApi('', `/v1/requests/${encodeURIComponent(id)}/certificate`, { method: 'POST' });
  } catch (e) {
    if (button) button.disabled = false;
    show(out, h('div', { class: 'card error', role: 'alert' }, plainApiError(state.served ?? '?', e)));
    return;
  }
  if (answer.status !== 200 || !answer.body) {
    if (button) button.disabled = false;
    show(out, h('div', { class: 'card error', role: 'alert' }, requestError(answer)));
    return;
  }
  show(out, h('div', { class: 'card success' }, `Certificate issued for request ${id}. 证明已出具。`));
  openCertificate(answer.body);
  await loadRequests();
}
