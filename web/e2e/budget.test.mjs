// The page in headless Chromium at a cluster whose filters exceed the page's budget: it holds what fits, and asks the serving domain about the rest.
//
// Starts `xarchive up` (three domains, 2000 sample records each, filters of
// 2.5 KB) with the page's budget set from the environment as an operator
// would set `[page]`: 6000 bytes and 2 filter requests a search, so the
// filters of two domains fit and the third's does not. Then checks what a
// person would see and what the browser sends:
//
//   - the page holds the filters of 2 of the 3 domains (the two smallest,
//     ties by name: A and B), says so in English and Chinese, and never
//     fetches C's;
//   - an absent archive number is not answered by the browser alone: the
//     serving domain is asked, answers 404, and the page says the browser
//     could not answer because of the budget, naming it;
//   - a record held by C, whose filter is not held, is still found, and
//     one held by A too;
//   - no search makes more filter or delta requests than the budget's 2;
//   - every domain's figures still reach the table, a budget's worth of
//     domains at a time.
//
//   npm ci --prefix web/e2e && cargo build -p xarchive && node --test web/e2e/

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import {
  closeAll,
  getJson,
  openBrowser,
  prerequisites,
  requestsDuring,
  seeText as see,
  segment,
  shot as snap,
  startCluster,
} from './harness.mjs';

const BUDGET = { bytes: 6000, requests: 2 };

let server = null;
let browser = null;
let page = null;
/** Every request the page sent to a domain's filter routes, from the start. */
const filterRequests = [];

const seeText = (locator, patterns, timeout) => see(page, locator, patterns, timeout);
const shot = (name) => snap(page, `budget-${name}`);
const isFilterRequest = (url) => url.pathname === '/v1/filter' || url.pathname === '/v1/filter/delta';
const portOf = (i) => String(server.port + i);

async function search(id) {
  await page.fill('#search-id', id);
  await page.click('#search-button');
}

/** What the page sends while one search runs to its answer: its filter requests and its lookups. */
async function searchCounting(id, expected) {
  let lookups = 0;
  const filters = await requestsDuring(page, (url) => {
    if (url.pathname.startsWith('/v1/lookup/')) lookups++;
    return isFilterRequest(url);
  }, async () => {
    await search(id);
    await seeText(page.locator('#result'), expected);
  });
  return { filters, lookups };
}

before(async () => {
  const chromium = await prerequisites();
  server = await startCluster({
    env: {
      XARCHIVE_PAGE__FILTER_BYTES: String(BUDGET.bytes),
      XARCHIVE_PAGE__FILTER_REQUESTS: String(BUDGET.requests),
    },
    log: 'xarchive-up-budget.log',
  });
  browser = await openBrowser(chromium);
  page = browser.page;
  page.on('request', (request) => {
    const url = new URL(request.url());
    if (isFilterRequest(url)) filterRequests.push(url);
  });
  await page.goto(`http://127.0.0.1:${server.port}/`);
  await page.locator('body[data-ready="true"]').waitFor();
});

after(() => closeAll(browser, server));

test('the serving domain tells the page its budget, and the three filters do not fit in it', async () => {
  const { body } = await getJson(`http://127.0.0.1:${server.port}/v1/cluster`);
  assert.deepEqual(body.page, { filter_bytes: BUDGET.bytes, filter_requests: BUDGET.requests });
  const sizes = body.domains.map((d) => d.filter_bytes);
  assert.equal(sizes.length, 3);
  assert.ok(sizes.every((b) => Number.isInteger(b) && b > 0), JSON.stringify(sizes));
  const [one, two, three] = [...sizes].sort((a, b) => a - b);
  assert.ok(one + two <= BUDGET.bytes && one + two + three > BUDGET.bytes, `sizes ${sizes}: the premise of these tests`);
});

test('the page holds the filters of two of the three domains and says that the other is asked of the server', async () => {
  await seeText(page.locator('#served-by'), ['served by domain A']);
  await seeText(page.locator('#cluster-summary'), ['3 domains', 'filters of 2 of 3 domains held in this browser']);
  await seeText(page.locator('#cluster-budget'), [
    "This page's budget (5.9 KB and 2 filter requests a search) holds the filters of 2 of 3 domains",
    'searches ask domain A about the other 1',
    '浏览器按预算保存 2 个档案域的过滤器，其余 1 个档案域由档案域 A 检索',
  ]);
  for (const name of ['A', 'B']) {
    await seeText(page.locator(`#cluster-rows tr[data-domain="${name}"]`), [/v\d+ · 2\.5 KB/, /synced/]);
  }
  await seeText(page.locator('#cluster-rows tr[data-domain="C"]'), ['not held 未保存', 'asked of A']);
  await shot('cluster');
});

test('an absent archive number is answered by the server, with the budget named as the reason', async () => {
  const id = `档案/1999/不存在-${Date.now()}-budget`;
  const { filters, lookups } = await searchCounting(id, [
    id,
    'Not in any domain',
    'Domain A searched the cluster',
    "The servers were asked because the browser could not answer by itself: domain C's filter is not held in this browser: " +
      "the filters of all 3 domains (7.5 KB) do not fit in this page's budget of 5.9 KB and 2 filter requests a search",
    '浏览器无法独立答复，已询问服务器',
  ]);
  const result = page.locator('#result');
  assert.equal(await result.locator('[data-answer]').first().getAttribute('data-answer'), 'server-absent');
  assert.ok(!(await result.innerText()).includes('Answered by this browser'));
  assert.equal(lookups, 1, 'the serving domain was asked');
  assert.ok(filters.length <= BUDGET.requests, `${filters.length} filter requests in one search:\n${filters.join('\n')}`);
  await shot('absent');
});

test('a record held by the domain whose filter is not held is found, and one held by a domain whose filter is', async () => {
  for (const [i, name] of [[2, 'C'], [0, 'A']]) {
    const base = `http://127.0.0.1:${portOf(i)}`;
    const { body: list } = await getJson(`${base}/v1/archives?limit=100`);
    const id = list.ids[42];
    const { body: record } = await getJson(`${base}/v1/archives/${segment(id)}`);
    const { filters, lookups } = await searchCounting(id, [`Found in domain ${name}`, record.title, id]);
    assert.equal(lookups, 1, name);
    assert.ok(filters.length <= BUDGET.requests, `${filters.length} filter requests in one search for ${name}'s record`);
    if (name === 'A') {
      await seeText(page.locator('#result'), ['The filters held in this browser said domain A may hold it.']);
    }
  }
  await shot('found');
});

test('every domain\'s figures reach the table, a budget\'s worth of domains each refresh', async () => {
  await seeText(page.locator('#cluster-summary'), ['6,000 records']);
  for (const name of ['A', 'B', 'C']) {
    await seeText(page.locator(`#cluster-rows tr[data-domain="${name}"]`), ['2,000']);
  }
});

test('the browser never fetched the filter of the domain beyond its budget', () => {
  assert.ok(filterRequests.length > 0, 'the filters within the budget were fetched');
  const ofC = filterRequests.filter((url) => url.port === portOf(2));
  assert.deepEqual(ofC.map(String), [], "C's filter is beyond the budget");
  const ports = new Set(filterRequests.map((url) => url.port));
  assert.deepEqual([...ports].sort(), [portOf(0), portOf(1)].sort());
});

test('no script error happened on the page', () => {
  assert.deepEqual(browser.pageErrors, []);
});
