// The certificate of a certified request, drawn to be printed for the applicant (with its PDF to download), and anyone's check of a certificate: online by its code at any archive, or in this browser from its QR code against the cluster's trust list.
//
// The certificate is drawn from what the issuing archive answered
// (requests-model.js `certificateModel`); style.css prints it alone on
// A4, black on white; the PDF (GET /v1/requests/{id}/certificate.pdf) is
// the same sealed sheets, one page each. A code is checked by the serving
// domain (GET /v1/certificates/{code}, no token needed), which asks the
// archive the code names. A payload is checked here (seal.js), against
// the trust list the serving domain serves (GET /v1/trust-list), its
// anchor's fingerprint shown, as `xarchive certificate verify` checks one
// offline.

import { plainApiError } from './util.js';
import { VERDICT, certificateModel, checkOutcome, notProvidedLabel, readCode, verdictLabel } from './requests-model.js';
import { openTrustList, verifyCertificate } from './seal.js';
import { $, h, show } from './dom.js';
import { apiError, callApi, fetchBytes } from './api.js';
import { state } from './cluster.js';

/** Closes the certificate view. */
export function closeCertificate() {
  const view = $('certificate');
  view.hidden = true;
  show(view);
  document.body.classList.remove('certificate-open');
}

/** One line of a list of fields: a label in both languages and its value. */
function field(zh, en, value) {
  return [h('dt', {}, zh, h('span', {}, en)), h('dd', {}, value ?? '—')];
}

/** A QR code as the server drew it (SVG), as an image. */
function qrImage(svg, label) {
  const src = `data:image/svg+xml;base64,${btoa(unescape(encodeURIComponent(svg)))}`;
  return h('img', { class: 'qr', src, alt: label, width: '180', height: '180' });
}

/** Downloads the certificate's PDF (with the clerk's token). */
async function downloadPdf(model, button) {
  button.disabled = true;
  try {
    const bytes = await fetchBytes(`/v1/requests/${encodeURIComponent(model.requestId)}/certificate.pdf`);
    const url = URL.createObjectURL(new Blob([bytes], { type: 'application/pdf' }));
    const link = h('a', { href: url, download: `certificate-${model.code}.pdf` });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  } catch (e) {
    show($('request-result'), h('div', { class: 'card error', role: 'alert' }, `The PDF could not be made. 无法生成 PDF：${e.message ?? e}`));
  } finally {
    button.disabled = false;
  }
}

/** Shows `certificate` (the API's Certificate), ready to print or download. */
export function openCertificate(certificate) {
  const view = $('certificate');
  const model = certificateModel(certificate);
  document.body.classList.add('certificate-open');
  view.hidden = false;
  if (model.error) {
    show(view, h('p', { class: 'card error', role: 'alert' }, model.error));
    return;
  }
  const copies = model.copies.map((c, i) =>
    h(
      'tr',
      { 'data-record': c.archiveNumber },
      h('td', { class: 'num' }, String(i + 1)),
      h('td', {}, c.holdingName),
      h('td', {}, h('code', {}, c.archiveNumber)),
      h('td', {}, c.title),
      h('td', {}, c.recordDate ?? '—'),
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
              n.holding ? `${n.holding}: ` : '',
              n.records.map((id) => h('code', {}, id)).flatMap((c, i) => (i ? [', ', c] : [c])),
              ` — ${notProvidedLabel(n.why)}`,
              n.reason ? `: ${n.reason}` : '',
            ),
          ),
        ),
      )
    : null;
  const pdf = h('button', { type: 'button', class: 'secondary', id: 'certificate-pdf' }, '下载 PDF Download the PDF');
  pdf.addEventListener('click', () => downloadPdf(model, pdf));
  const statementZh = model.noRecords
    ? `兹证明：应申请人 ${model.applicantName} 的申请（用途：${model.purpose}），${model.issuer.name} 经查询本集群各档案馆，截至 ${model.date}，均未保存申请人的档案记录。`
    : `兹证明：应申请人 ${model.applicantName} 的申请（用途：${model.purpose}），${model.issuer.name} 受理并向馆藏档案馆查询，下列档案复制件由馆藏档案馆加盖电子印章签发，经核验无误。`;
  const statementEn = model.noRecords
    ? `At the request of ${model.applicantName} (purpose: ${model.purpose}), ${model.issuer.name} asked every archive of the cluster: as of ${model.date}, none holds a record of the applicant.` // i18n: translated above
    : `At the request of ${model.applicantName} (purpose: ${model.purpose}), ${model.issuer.name} asked the archives holding the records below; each copy was sealed by its holding archive and checked on receipt.`; // i18n: translated above
  show(
    view,
    h(
      'div',
      { class: 'certificate-actions no-print' },
      h('button', { type: 'button', id: 'certificate-print', onclick: () => window.print() }, '打印 Print'),
      pdf,
      h('button', { type: 'button', class: 'secondary', id: 'certificate-close', onclick: closeCertificate }, '关闭 Close'),
    ),
    h(
      'article',
      { class: 'certificate-sheet', 'data-request': model.requestId, 'data-code': model.code },
      h('p', { class: 'issuer' }, model.issuer.name),
      h('h2', { id: 'certificate-title' }, '档案查询证明', h('span', {}, 'Certificate of archive search')),
      h('p', { class: 'statement' }, statementZh),
      h('p', { class: 'statement en' }, statementEn),
      h(
        'dl',
        { class: 'fields' },
        field('申请人 ', 'Applicant', model.applicantName),
        field('用途 ', 'Purpose', model.purpose),
        field('申请编号 ', 'Request ID', h('code', {}, model.requestId)),
        field('出证日期 ', 'Date issued', model.date),
        field('出证机构 ', 'Issued by', `${model.issuer.name} (${model.issuer.domain})`),
        field('核验码 ', 'Verification code', h('code', { class: 'verification-code' }, model.code)),
        field('经办人 ', 'Clerk', model.clerk),
      ),
      copies.length
        ? h(
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
                h('th', { scope: 'col' }, '形成日期', h('br'), h('span', {}, 'Record date')),
              ),
            ),
            h('tbody', {}, copies),
          )
        : null,
      notProvided,
      h(
        'div',
        { class: 'certificate-foot' },
        h(
          'div',
          { class: 'verify-note' },
          h('p', {}, `核验方法：扫描二维码离线核验，或在本集群任一档案馆的页面输入核验码 ${model.code}。${model.verifyUrl ?? ''}`),
          h('p', { class: 'en' }, `To verify: scan a QR code (checked offline against the archives’ trust list), or enter the code ${model.code} on the page of any archive of the cluster.`), // i18n: translated above
          h('p', {}, model.issuer.name, h('br'), model.issuer.address, h('br'), `${model.date ?? ''}（印章 Seal）`),
        ),
        h(
          'div',
          { class: 'qr-codes' },
          model.sheets.map((sheet) =>
            h(
              'figure',
              { 'data-sheet': String(sheet.number) },
              qrImage(sheet.qrSvg, `二维码 QR code ${sheet.number}/${model.sheets.length}`),
              h('figcaption', {}, `第 ${sheet.number} 页，共 ${model.sheets.length} 页 · Sheet ${sheet.number} of ${model.sheets.length}`),
            ),
          ),
        ),
      ),
    ),
  );
  view.scrollIntoView({ block: 'start' });
}

/** Says `text` in the check's result area, as `cls` (success, warning, error, pending). */
function sayIn(out, cls, ...text) {
  show(out, h('div', { class: `card ${cls}`, role: cls === 'error' ? 'alert' : null }, ...text));
}

/** What a checked certificate says, to compare with the paper: `check` is the API's CertificateCheck. */
function checkedFields(check) {
  return h(
    'div',
    {},
    h(
      'dl',
      { class: 'fields' },
      field('核验码 ', 'Code', h('code', {}, check.code)),
      field('出证机构 ', 'Issued by', `${check.issuer?.name ?? ''} (${check.issuer?.domain ?? ''})`),
      field('出证时间 ', 'Issued', check.issued_at),
      field('申请人 ', 'Applicant', check.applicant_name),
      field('用途 ', 'Purpose', check.purpose),
      field('申请编号 ', 'Request ID', h('code', {}, check.request_id)),
      field('核验档案馆 ', 'Checked by', check.checked_by),
    ),
    copyTable((check.copies ?? []).map((c) => ({ holding: c.holding?.name ?? '', archiveNumber: c.archive_number, title: c.title, recordDate: c.record_date }))),
  );
}

/** The copies of a checked certificate. */
function copyTable(copies) {
  if (!copies.length) return h('p', { class: 'muted' }, '无复制件：查无档案记录的证明。 No copies: a certificate that no record is held.');
  return h(
    'table',
    { class: 'certificate-copies' },
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        h('th', { scope: 'col' }, '馆藏档案馆 Holding archive'),
        h('th', { scope: 'col' }, '档案号 Archive number'),
        h('th', { scope: 'col' }, '题名 Title'),
        h('th', { scope: 'col' }, '形成日期 Record date'),
      ),
    ),
    h(
      'tbody',
      {},
      copies.map((c) => h('tr', {}, h('td', {}, c.holding), h('td', {}, h('code', {}, c.archiveNumber)), h('td', {}, c.title), h('td', {}, c.recordDate ?? '—'))),
    ),
  );
}

/** The check by code: asks the serving domain, which asks the archive that issued it. */
export async function checkCode(typed) {
  const out = $('check-result');
  const say = (cls, ...text) => sayIn(out, cls, ...text);
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
  switch (outcome.kind) {
    case 'valid':
      return say(
        'success',
        h('h3', {}, '有效 ', h('span', {}, 'Valid')),
        h('p', {}, '证明与出证档案馆保存的一致，各复制件的印章均核验无误；请与纸面逐项核对。 The certificate is as its archive issued it and every copy’s seal checks; compare each field with the paper.'),
        checkedFields(outcome.check),
      );
    case 'invalid':
      return say(
        'error',
        h('h3', {}, '无效 ', h('span', {}, 'Invalid')),
        h('p', {}, '该核验码下保存的证明或复制件与其印章不符，证明不可信。 What is kept under this code no longer matches its seals: the certificate cannot be trusted.'),
        answer.body?.message ? h('p', { class: 'small' }, answer.body.message) : null,
      );
    case 'not_found':
      return say(
        'warning',
        h('h3', {}, '未找到 ', h('span', {}, 'Not found')),
        h('p', {}, '核验码所指的档案馆未出具过该证明，请核对核验码。 The archive the code names issued no certificate under it: check the code.'),
      );
    case 'unavailable':
      return say(
        'warning',
        h('h3', {}, '暂时无法核验 ', h('span', {}, 'Cannot be checked now')),
        h('p', {}, '出证档案馆暂时无法连接；可稍后再试，或扫描证明上的二维码离线核验。 The issuing archive cannot be reached now: try later, or check the certificate’s QR code offline.'),
      );
    case 'malformed':
      return say('error', `这不是有效的核验码格式。 Not a verification code${answer.body?.message ? `: ${answer.body.message}` : ''}.`);
    default:
      return say('error', plainApiError(state.served ?? '?', apiError(answer)));
  }
}

/** The trust list as the serving domain last served it, opened. */
let trust = null;

/** Checks a payload (as a QR code holds it) here, against the trust list. */
export async function verifyPayload(text) {
  const out = $('verify-result');
  const say = (cls, ...parts) => sayIn(out, cls, ...parts);
  if (!String(text ?? '').trim()) {
    out.dataset.state = 'malformed';
    return say('error', '请粘贴或扫描证明上二维码的内容。 Paste or scan the text of a certificate’s QR code.');
  }
  out.dataset.state = 'checking';
  say('pending', 'Checking… 核验中…');
  try {
    const answer = await callApi('', '/v1/trust-list');
    if (answer.status !== 200 || !answer.body) throw apiError(answer);
    trust = await openTrustList(answer.body);
  } catch (e) {
    if (!trust) {
      out.dataset.state = 'error';
      return say('error', `无法读取信任列表。 The trust list cannot be read: ${e.message ?? e}`);
    }
  }
  const verdict = await verifyCertificate(text, trust.list);
  const reason = verdict.valid ? 'valid' : verdict.reason;
  out.dataset.state = reason;
  const about = VERDICT[reason];
  const anchor = h('p', { class: 'small muted' }, `信任列表 Trust list: ${trust.list.cluster} · 根指纹 anchor ${trust.anchor}`);
  if (!verdict.valid) {
    return say('error', h('h3', {}, verdictLabel(reason)), h('p', {}, about?.says ?? ''), h('p', { class: 'small' }, verdict.message), anchor);
  }
  const c = verdict.certificate;
  return say(
    'success',
    h('h3', {}, verdictLabel('valid')),
    h('p', {}, `${about.says} 请与纸面逐项核对。 Compare each field with the paper.`),
    h(
      'dl',
      { class: 'fields' },
      field('核验码 ', 'Code', h('code', {}, c.code)),
      field('出证机构 ', 'Issued by', `${verdict.issuer.display_name || verdict.issuer.domain} (${verdict.issuer.domain})`),
      field('出证时间 ', 'Issued', new Date(c.issued * 1000).toISOString()),
      field('申请人 ', 'Applicant', c.applicantName),
      field('用途 ', 'Purpose', c.purpose),
      field('申请编号 ', 'Request ID', h('code', {}, c.requestId)),
      field('页 ', 'Sheet', `${c.sheet} / ${c.sheets}`),
    ),
    copyTable(verdict.copies.map((copy) => ({ holding: copy.holdingName, archiveNumber: copy.archiveNumber, title: copy.title, recordDate: copy.recordDate }))),
    anchor,
  );
}

/** Whether this browser reads QR codes itself (BarcodeDetector). */
export function canScan() {
  return typeof globalThis.BarcodeDetector === 'function';
}

/** The first QR code's text in `source` (an image, a video frame), or null. */
async function readQr(source) {
  const detector = new globalThis.BarcodeDetector({ formats: ['qr_code'] });
  const found = await detector.detect(source);
  return found[0]?.rawValue ?? null;
}

/** Reads a QR code from a picture the person chose, then checks it. */
export async function scanImage(file) {
  if (!file) return;
  const text = await readQr(await createImageBitmap(file));
  if (!text) {
    sayIn($('verify-result'), 'warning', '图片中没有找到二维码。 No QR code was found in the picture.');
    return;
  }
  $('verify-payload').value = text;
  await verifyPayload(text);
}

/** Reads a QR code with the camera (for up to 30 s), then checks it. */
export async function scanCamera() {
  const video = $('verify-camera');
  let stream;
  try {
    stream = await navigator.mediaDevices.getUserMedia({ video: { facingMode: 'environment' } });
  } catch (e) {
    sayIn($('verify-result'), 'error', `无法打开摄像头。 The camera cannot be opened: ${e.message ?? e}`);
    return;
  }
  video.srcObject = stream;
  video.hidden = false;
  await video.play();
  const until = Date.now() + 30_000;
  let text = null;
  try {
    while (!text && Date.now() < until) {
      text = await readQr(video);
      if (!text) await new Promise((r) => setTimeout(r, 300));
    }
  } finally {
    for (const track of stream.getTracks()) track.stop();
    video.hidden = true;
    video.srcObject = null;
  }
  if (!text) {
    sayIn($('verify-result'), 'warning', '30 秒内未读到二维码。 No QR code was read within 30 s.');
    return;
  }
  $('verify-payload').value = text;
  await verifyPayload(text);
}
