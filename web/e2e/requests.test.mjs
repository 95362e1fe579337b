// Cross-archive requests through the page in headless Chromium: the clerk at one archive, the reviewer at another, the certificate and its check.
//
// Starts `xarchive up` (three domains, a few sample records each; no
// tokens, so every role is open), stores a record at domain B that B's
// release policy leaves to review (no category), and then, as people would:
//
//   - a clerk at domain A's page registers a request for it; the request
//     shows in the list as awaiting one archive in review, neither B nor
//     the record named, and the identity number field is emptied; the
//     number is in no URL, no storage, no console line;
//   - a reviewer at domain B's page sees the request in the queue, cannot
//     refuse without a reason, approves it; a second decision (from a
//     queue drawn before the first) is answered "already decided";
//   - A's list moves to "answered" by itself; the clerk issues the
//     certificate and sees it, with the holding archive, archive number,
//     title, the record's date, request ID, applicant, purpose, the
//     verification code and the QR code; printed, only the certificate is
//     shown;
//   - the code checks as valid at A and at C (which asks A), and a code
//     issued nowhere as not found;
//   - its QR code's payload checks in the browser against the trust list
//     as valid; changed (the applicant's name, under A's real seal) as
//     changed; sealed by keys of another cluster as an unknown seal;
//   - domain A's own review queue is drawn, empty.
//
//   npm ci --prefix web/e2e && cargo build -p xarchive && node --test web/e2e/requests.test.mjs

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import { base45Decode, payloadBytes } from '../seal.js';

import {
  closeAll,
  openBrowser,
  prerequisites,
  requestsDuring,
  seeText as see,
  segment,
  shot as snap,
  startCluster,
} from './harness.mjs';

/** A valid resident identity number (its check digit is right), used by no sample person's record here. */
const IDENTITY = '11010519491231002X';
const RECORD = `REQ-E2E-${Date.now()}`;
const TITLE = '关于张三婚姻登记的档案';

let server = null;
let browser = null;
let page = null; // domain A's page: the clerk
let reviewer = null; // domain B's page: the reviewer
let pageErrors = [];
const consoleLines = [];
/** Every URL either page asked for. */
const urls = [];
let requestId = null;
let code = null;

const seeText = (locator, patterns, on = page) => see(on, locator, patterns);
const shot = (name, on = page) => snap(on, `requests-${name}`);

function watch(p) {
  p.on('console', (m) => consoleLines.push(m.text()));
  p.on('request', (r) => urls.push(r.url()));
}

before(async () => {
  const chromium = await prerequisites();
  server = await startCluster({ records: 20, log: 'xarchive-up-requests.log' });
  const put = await fetch(`http://127.0.0.1:${server.port + 1}/v1/archives/${segment(RECORD)}`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ title: TITLE, metadata: { fonds: 'J900', year: 2010 } }),
    signal: AbortSignal.timeout(5000),
  });
  assert.equal(put.status, 201, await put.text());
  browser = await openBrowser(chromium);
  ({ page, pageErrors } = browser);
  watch(page);
  await page.goto(`http://127.0.0.1:${server.port}/`);
  await page.locator('body[data-ready="true"]').waitFor();
});

after(() => closeAll(browser, server));

test('a clerk registers a request; it is listed as awaiting one archive in review, unnamed, and the identity number is gone', async () => {
  await seeText(page.locator('#requests-list'), ['No requests registered here yet']);
  await page.fill('#request-applicant-id', IDENTITY);
  await page.fill('#request-applicant-name', '张三');
  await page.fill('#request-purpose', '贷款 loan');
  await page.fill('#request-records', RECORD);
  const posts = await requestsDuring(page, (url) => url.pathname === '/v1/requests', async () => {
    await page.click('#request-button');
    await seeText(page.locator('#request-result'), ['Request registered', '申请已登记', '张三']);
  });
  assert.ok(posts.length >= 1, 'the request was sent');
  assert.equal(await page.inputValue('#request-applicant-id'), '', 'the identity number field is emptied');

  const item = page.locator('#requests-list li.request').first();
  await seeText(item, ['张三', '贷款 loan', 'Awaiting 1 archive, 1 in review', '其中 1 个在审核中']);
  // Neither the holding archive nor its record is named before it answers.
  const text = await item.innerText();
  assert.ok(!text.includes('(B)') && !text.includes(RECORD), text);
  requestId = await item.getAttribute('data-request');
  assert.match(requestId, /^[0-9a-f]{32}$/);
  assert.equal(await item.locator('button.certify').count(), 0, 'no certificate before an answer');
  await shot('registered');
});

test("a reviewer at the holding archive sees the request, must give a reason to refuse, and approves; a second decision is refused as already decided", async () => {
  assert.ok(requestId, 'the request of the test before');
  reviewer = await browser.context.newPage();
  watch(reviewer);
  reviewer.on('pageerror', (e) => pageErrors.push(e.message));
  await reviewer.goto(`http://127.0.0.1:${server.port + 1}/`);
  const item = reviewer.locator(`#reviews-list li.review[data-request="${requestId}"]`);
  await seeText(item, ['张三', '贷款 loan', '来自 from A (A)', RECORD, TITLE, 'The applicant is not named in it', 'Why it needs review'], reviewer);
  const stale = await (await fetch(`http://127.0.0.1:${server.port + 1}/v1/reviews`)).text();

  await item.locator('button.refuse').click();
  await seeText(reviewer.locator('#reviews-result'), ['Type the reason for refusing', '拒绝前请填写理由'], reviewer);
  await item.locator('button.approve').click();
  await seeText(reviewer.locator('#reviews-result'), [`Approved request ${requestId} from archive A`, '已批准'], reviewer);
  await seeText(reviewer.locator('#reviews-list'), ['Nothing waits for review here'], reviewer);

  // A queue drawn before the decision (another reviewer's screen): the
  // request is still offered there, and deciding it again is refused.
  const queue = (url) => url.pathname === '/v1/reviews';
  await reviewer.route(queue, (route) =>
    route.request().method() === 'GET'
      ? route.fulfill({ status: 200, contentType: 'application/json', body: stale })
      : route.continue(),
  );
  try {
    await reviewer.click('#reviews-refresh');
    await item.locator('input.refuse-reason').fill('不符合规定 not allowed');
    await item.locator('button.refuse').click();
    const alert = reviewer.locator('#reviews-result [role=alert]');
    await seeText(alert, ['already decided', '已经处理过'], reviewer);
    await shot('reviewer-conflict', reviewer);
  } finally {
    await reviewer.unroute(queue);
  }
});

test('the request is answered by itself; the clerk issues the certificate, which prints alone', async () => {
  assert.ok(requestId, 'the request of the tests before');
  const item = page.locator(`#requests-list li.request[data-request="${requestId}"]`);
  await seeText(item, ['已答复 Answered', '已提供 Released', RECORD, TITLE]);
  await item.locator('button.certify').click();

  const sheet = page.locator('#certificate .certificate-sheet');
  await seeText(sheet, [
    '档案查询证明',
    'Certificate of archive search',
    '张三',
    '贷款 loan',
    requestId,
    RECORD,
    TITLE,
    '出证机构',
    'A (A)',
    /\d{4}-\d{2}-\d{2}/,
  ]);
  code = (await sheet.locator('.verification-code').first().innerText()).trim();
  assert.match(code, /^A\.[0-9A-F]{4}(-[0-9A-F]{4}){4}$/);
  assert.equal(await sheet.locator('.qr-codes img.qr').count(), 1, 'one QR code for one sheet');
  await seeText(item, ['已出证 Certified', '查看证明 View certificate']);
  await shot('certificate');

  // Printed: the certificate alone, black on white.
  await page.emulateMedia({ media: 'print' });
  try {
    assert.equal(await page.locator('main').isVisible(), false, 'the page itself is not printed');
    assert.equal(await page.locator('header.top').isVisible(), false, 'nor its header');
    assert.equal(await page.locator('#certificate-print').isVisible(), false, 'nor the buttons');
    assert.equal(await sheet.isVisible(), true);
    const colours = await sheet.evaluate((el) => {
      const s = getComputedStyle(el);
      return [s.color, s.backgroundColor];
    });
    assert.deepEqual(colours, ['rgb(0, 0, 0)', 'rgb(255, 255, 255)']);
    await shot('certificate-print');
  } finally {
    await page.emulateMedia({ media: 'screen' });
  }
  await page.click('#certificate-close');
  assert.equal(await page.locator('#certificate').isVisible(), false);
  await page.locator('button.view-certificate').first().click();
  await seeText(sheet, ['档案查询证明', code]);
});

test("the certificate's code checks as valid at the archive that issued it and at another; a code issued nowhere as not found", async () => {
  assert.ok(code, 'the code of the test before');
  // The hex part as a person might type it.
  await page.fill('#check-code', code.replace(/\..*$/, (hexPart) => hexPart.toLowerCase()));
  await page.click('#check-button');
  await seeText(page.locator('#check-result'), ['有效', 'Valid', RECORD, TITLE, requestId, '张三']);
  const elsewhere = await browser.context.newPage();
  await elsewhere.goto(`http://127.0.0.1:${server.port + 2}/`);
  await elsewhere.fill('#check-code', code);
  await elsewhere.click('#check-button');
  await seeText(elsewhere.locator('#check-result'), ['有效', 'Valid', RECORD, 'asked A'], elsewhere);
  await elsewhere.close();
  for (const nowhere of ['A.FFFF-FFFF-FFFF-FFFF-FFFF', 'FFFF-FFFF-FFFF-FFFF-FFFF']) {
    await page.fill('#check-code', nowhere);
    await page.click('#check-button');
    await seeText(page.locator('#check-result'), ['未找到', 'Not found']);
  }
  await page.fill('#check-code', 'not a code');
  await page.click('#check-button');
  await seeText(page.locator('#check-result'), ['20 hex digits']);
  await shot('check');
});

/** `bytes` in base45 (RFC 9285). */
function base45Encode(bytes) {
  const alphabet = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ $%*+-./:';
  let out = '';
  for (let i = 0; i < bytes.length; i += 2) {
    if (i + 1 < bytes.length) {
      let n = bytes[i] * 256 + bytes[i + 1];
      for (let k = 0; k < 3; k++) {
        out += alphabet[n % 45];
        n = Math.floor(n / 45);
      }
    } else {
      let n = bytes[i];
      for (let k = 0; k < 2; k++) {
        out += alphabet[n % 45];
        n = Math.floor(n / 45);
      }
    }
  }
  return out;
}

/** `payload` with the applicant's name changed, under the same seal. */
async function withNameChanged(payload) {
  const sealed = await payloadBytes(payload);
  const from = new TextEncoder().encode('张三');
  const to = new TextEncoder().encode('李四');
  const at = sealed.findIndex((_, i) => from.every((b, k) => sealed[i + k] === b));
  assert.ok(at >= 0, 'the name is in the payload');
  sealed.set(to, at);
  const stream = new Blob([sealed]).stream().pipeThrough(new CompressionStream('deflate'));
  const compressed = new Uint8Array(await new Response(stream).arrayBuffer());
  assert.ok(base45Decode(base45Encode(compressed)).every((b, i) => b === compressed[i]));
  return `XA1:${base45Encode(compressed)}`;
}

test("the certificate's QR payload checks in the browser as valid, changed, or sealed by an unknown key", async () => {
  assert.ok(requestId, 'the request of the tests before');
  const issued = await (await fetch(`http://127.0.0.1:${server.port}/v1/requests/${requestId}/certificate`)).json();
  const payload = issued.sheets[0].payload;
  const vectors = JSON.parse(readFileSync(new URL('../test/seal-vectors.json', import.meta.url), 'utf8'));
  const elsewhere = vectors.certificates.find((c) => c.valid).payload;
  const cases = [
    [payload, 'valid', ['有效 Valid', '张三', RECORD, TITLE, code]],
    [await withNameChanged(payload), 'changed', ['已被改动 Changed']],
    [elsewhere, 'unknown_key', ['印章未知 Unknown seal']],
    [payload.slice(0, 60), 'malformed', ['无法读取 Not a certificate']],
  ];
  for (const [text, state, words] of cases) {
    await page.fill('#verify-payload', text);
    await page.click('#verify-button');
    await page.locator(`#verify-result[data-state="${state}"]`).waitFor({ timeout: 20_000 });
    await seeText(page.locator('#verify-result'), words);
  }
  await shot('verify');
});

test("domain A's review queue is drawn, with nothing waiting", async () => {
  await seeText(page.locator('#reviews-list'), ['Nothing waits for review here', '暂无待审核的申请']);
});

test('the identity number was in no URL, no storage and no console line; no script error happened', async () => {
  const digits = IDENTITY.slice(6, 14);
  for (const u of [...urls, page.url()]) {
    assert.ok(!decodeURIComponent(u).includes(digits), `the number is in ${u}`);
  }
  for (const p of [page, reviewer].filter(Boolean)) {
    const stored = await p.evaluate(() => JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }));
    assert.ok(!stored.includes(digits), stored);
  }
  for (const line of consoleLines) assert.ok(!line.includes(digits), line);
  assert.deepEqual(pageErrors, []);
});
