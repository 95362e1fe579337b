// Cross-archive requests through the page in headless Chromium: the clerk at one archive, the reviewer at another, the certificate and its check.
//
// Starts `xarchive up` (three domains, a few sample records each; no
// tokens, so every role is open), stores a record at domain B that B's
// release policy leaves to review (no category), and then, as people would:
//
//   - a clerk at domain A's page registers a request for it; the request
//     shows in the list, B's state "in review", and the identity number
//     field is emptied; the number is in no URL, no storage, no console line;
//   - a reviewer at domain B's page sees the request in the queue, cannot
//     refuse without a reason, approves it; a second decision (from a
//     queue drawn before the first) is answered "already decided";
//   - A's list moves to "answered" by itself; the clerk issues the
//     certificate and sees it, with the holding archive, archive number,
//     title, date, request ID, applicant, purpose and verification code;
//     printed, only the certificate is shown;
//   - the code checks as valid at A, and a code issued nowhere as not found;
//   - domain A's own review queue is drawn, empty.
//
//   npm ci --prefix web/e2e && cargo build -p xarchive && node --test web/e2e/requests.test.mjs

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

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

test('a clerk registers a request; it is listed with the holding archive in review, and the identity number is gone', async () => {
  await seeText(page.locator('#requests-list'), ['No requests registered here yet']);
  await page.fill('#request-applicant-id', IDENTITY);
  await page.fill('#request-applicant-name', '张三');
  await page.fill('#request-purpose', '贷款 loan');
  await page.fill('#request-records', RECORD);
  const posts = await requestsDuring(page, (url) => url.pathname === '/v1/requests', async () => {
    await page.click('#request-button');
    await seeText(page.locator('#request-result'), ['Request registered', '申请已登记', '张三', RECORD]);
  });
  assert.ok(posts.length >= 1, 'the request was sent');
  assert.equal(await page.inputValue('#request-applicant-id'), '', 'the identity number field is emptied');

  const item = page.locator('#requests-list li.request').first();
  await seeText(item, ['张三', '贷款 loan', '档案域 B · Archive B', '审核中 In review', RECORD]);
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
  await seeText(item, ['张三', '贷款 loan', '来自档案域 A', RECORD, 'Why it needs review'], reviewer);
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
  await seeText(item, ['已答复 Answered', '已提供 Released', '1 份复制件 copies']);
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
    '档案域 B',
    '受理档案馆',
    '档案域 A · Archive A',
    /\d{4}-\d{2}-\d{2}/,
  ]);
  code = (await sheet.locator('.verification-code').first().innerText()).trim();
  assert.match(code, /^[0-9A-F]{4}(-[0-9A-F]{4}){4}$/);
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

test("the certificate's code checks as valid; a code issued nowhere as not found", async () => {
  assert.ok(code, 'the code of the test before');
  await page.fill('#check-code', code.toLowerCase());
  await page.click('#check-button');
  await seeText(page.locator('#check-result'), ['有效', 'Valid', RECORD, TITLE, requestId]);
  await page.fill('#check-code', 'FFFF-FFFF-FFFF-FFFF-FFFF');
  await page.click('#check-button');
  await seeText(page.locator('#check-result'), ['未找到', 'Not found']);
  await page.fill('#check-code', 'not a code');
  await page.click('#check-button');
  await seeText(page.locator('#check-result'), ['20 hex digits']);
  await shot('check');
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
