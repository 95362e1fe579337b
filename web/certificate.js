// The certificate of a certified request, drawn to be printed for the applicant, and the form anyone uses to check a verification code.
//
// The certificate is drawn from the request as the receiving archive keeps
// it (requests-model.js `certificateModel`); style.css prints it alone on
// A4, black on white. The check asks the serving domain
// (GET /v1/certificates/{code}, no token needed), which verifies the kept
// copy's signature again.

import { plainApiError } from './util.js';
import { certificateModel, checkOutcome, readCode } from './requests-model.js';
import { $, h, show } from './dom.js';
import { apiError, callApi } from './api.js';
import { state } from './cluster.js';

/** Closes the certificate view. */
export function closeCertificate() {
  const view = $('certificate');
  view.hidden = true;
  show(view);
  document.body.classList.remove('certificate-open');
}

/** One line of the certificate's head: a label in both languages and its value. */
function field(zh, en, value) {
  return [h('dt', {}, zh, h('span', {}, en)), h('dd', {}, value ?? '—')];
}

/** Shows the certificate of `request` (a certified RequestView), ready to print. */
export function openCertificate(request) {
  const view = $('certificate');
  const model = certificateModel(request, state.served);
  document.body.classList.add('certificate-open');
  view.hidden = false;
  if (model.error) {
    show(view, h('p', { class: 'card error', role: 'alert' }, model.error));
    return;
  }
  const copies = model.copies.map((c, i) =>
    h(
      'tr',
      { 'data-code': c.code },
      h('td', { class: 'num' }, String(i + 1)),
      h('td', {}, `档案域 ${c.holding}`, h('br'), h('span', { class: 'en' }, `Archive ${c.holding}`)),
      h('td', {}, h('code', {}, c.archiveNumber)),
      h('td', {}, c.title),
      h('td', {}, c.date),
      h('td', {}, h('code', { class: 'verification-code' }, c.code)),
    ),
  );
  const notProvided = model.notProvided.length
    ? h(
        'div',
        { class: 'not-provided' },
        h('h3', {}, '未能提供 ', h('span', {}, 'Not provided')),
        h(
          'ul',
          {},
          model.notProvided.map((n) =>
            h(
              'li',
              {},
              n.holding ? `档案域 ${n.holding} · Archive ${n.holding}: ` : '',
              n.records.map((id) => h('code', {}, id)).flatMap((c, i) => (i ? [', ', c] : [c])),
              n.reason ? ` — ${n.reason}` : '',
            ),
          ),
        ),
      )
    : null;
  show(
    view,
    h(
      'div',
      { class: 'certificate-actions no-print' },
      h('button', { type: 'button', id: 'certificate-print', onclick: () => window.print() }, '打印 Print'),
      h('button', { type: 'button', class: 'secondary', id: 'certificate-close', onclick: closeCertificate }, '关闭 Close'),
    ),
    h(
      'article',
      { class: 'certificate-sheet', 'data-request': model.requestId },
      h('h2', { id: 'certificate-title' }, '档案查询证明', h('span', {}, 'Certificate of archive search')),
      h(
        'p',
        { class: 'statement' },
        `兹证明：应申请人 ${model.applicantName} 的申请（用途：${model.purpose}），档案域 ${model.receiving ?? '—'} 受理并向馆藏档案馆查询，下列档案复制件由馆藏档案馆签发，经核验无误。`,
      ),
      h(
        'p',
        { class: 'statement en' },
        `At the request of ${model.applicantName} (purpose: ${model.purpose}), archive ${model.receiving ?? '—'} asked the archives holding the records below; each copy was signed by its holding archive and checked on receipt.`,  // i18n: translated above
      ),
      h(
        'dl',
        { class: 'fields' },
        field('申请人 ', 'Applicant', model.applicantName),
        field('用途 ', 'Purpose', model.purpose),
        field('申请编号 ', 'Request ID', h('code', {}, model.requestId)),
        field('受理档案馆 ', 'Receiving archive', model.receiving ? `档案域 ${model.receiving} · Archive ${model.receiving}` : '—'),
        field('出证日期 ', 'Date issued', model.date),
        field('经办人 ', 'Clerk', model.clerk),
      ),
      h(
        'table',
        { class: 'certificate-copies' },
        h(
          'thead',
          {},
          h(
            'tr',
            {},
            h('th', { scope: 'col', class: 'num' }, '序号', h('br'), h('span', {}, 'No.')),
            h('th', { scope: 'col' }, '馆藏档案馆', h('br'), h('span', {}, 'Holding archive')),
            h('th', { scope: 'col' }, '档案号', h('br'), h('span', {}, 'Archive number')),
            h('th', { scope: 'col' }, '题名', h('br'), h('span', {}, 'Title')),
            h('th', { scope: 'col' }, '日期', h('br'), h('span', {}, 'Date')),
            h('th', { scope: 'col' }, '核验码', h('br'), h('span', {}, 'Verification code')),
          ),
        ),
        h('tbody', {}, copies),
      ),
      notProvided,
      h(
        'p',
        { class: 'verify-note' },
        `核验方法：在受理或馆藏档案馆的页面输入核验码，或访问 /v1/certificates/{核验码}。 `,
        h('span', { class: 'en' }, 'To verify: enter a code in the page of either archive, or open /v1/certificates/{code} there.'),
      ),
    ),
  );
  view.scrollIntoView({ block: 'start' });
}

/** The check form: asks the serving domain whether a verification code is valid. */
export async function checkCode(typed) {
  const out = $('check-result');
  const say = (cls, ...text) => show(out, h('div', { class: `card ${cls}`, role: cls === 'error' ? 'alert' : null }, ...text));
  const read = readCode(typed);
  if (read.error) {
    out.dataset.state = 'malformed';
    return say('error', read.error);
  }
  out.dataset.state = 'checking';
  say('pending', 'Checking… 核验中…');
  let answer;
  try {
    answer = await callApi('', `/v1/certificates/${encodeURIComponent(read.code)}`);
  } catch (e) {
    out.dataset.state = 'error';
    return say('error', plainApiError(state.served ?? '?', e));
  }
  const outcome = checkOutcome(answer);
  out.dataset.state = outcome.kind;
  const served = state.served ?? '?';
  switch (outcome.kind) {
    case 'valid': {
      const c = outcome.check;
      return say(
        'success',
        h('h3', {}, '有效 ', h('span', {}, 'Valid')),
        h('p', {}, `The copy is as archive ${c.holding} signed it. 复制件与馆藏档案馆的签名一致。`),
        h(
          'dl',
          { class: 'fields' },
          field('核验码 ', 'Code', h('code', {}, c.code)),
          field('档案号 ', 'Archive number', h('code', {}, c.archive_number)),
          field('题名 ', 'Title', c.title),
          field('日期 ', 'Date', c.date),
          field('馆藏档案馆 ', 'Holding archive', c.holding),
          field('受理档案馆 ', 'Receiving archive', c.receiving),
          field('申请编号 ', 'Request ID', h('code', {}, c.request_id)),
          c.content_sha256 ? field('内容摘要 ', 'Content SHA-256', h('code', { class: 'small' }, c.content_sha256)) : null,
          field('核验档案馆 ', 'Checked by', c.checked_by),
        ),
      );
    }
    case 'invalid':
      return say(
        'error',
        h('h3', {}, '无效 ', h('span', {}, 'Invalid')),
        h('p', {}, `Domain ${served} keeps a copy under this code, but it no longer matches its signature: the certificate cannot be trusted. 该核验码对应的复制件与签名不符，证明不可信。`),
      );
    case 'not_found':
      return say(
        'warning',
        h('h3', {}, '未找到 ', h('span', {}, 'Not found')),
        h('p', {}, `Domain ${served} neither issued nor released a certificate with this code. Check the code, or ask the other archive named on the certificate. 本档案域未出具或签发过该核验码，请核对，或到证明上的另一档案馆核验。`),
      );
    case 'malformed':
      return say('error', `Not a verification code${answer.body?.message ? `: ${answer.body.message}` : ''}. 这不是有效的核验码格式。`);
    default:
      return say('error', plainApiError(served, apiError(answer)));
  }
}
