// The page in headless Chromium against a real cluster.
//
// Starts `target/debug/xarchive up` (three domains, 2000 sample records
// each) on free loopback ports in a temporary directory, opens the page
// served by domain A in Debian's Chromium (/usr/bin/chromium, driven by
// playwright-core), and checks what a person would see:
//
//   - every epoch in a JSON body survives JSON.parse (doubles only) and
//     is accepted back by /v1/filter/delta;
//   - a record held by domain C is found, with its owner and route;
//   - an absent archive number is answered "not in any domain" by the
//     browser itself, without any lookup request;
//   - a number typed with an ASCII dot for "·" and spaces is found, and
//     one held nowhere is answered with the nearest numbers held;
//   - a record added through the page to domain B is found there;
//   - a record deleted through the page is then reported gone;
//   - with one domain's filter out of reach, the browser does not answer
//     "not here" by itself but asks the server, and says why;
//   - a person is found in every domain holding their records, by identity number, grouped by
//     archive, without the number in any URL.
//
// Screenshots go to test-artifacts/ (page.png, and one per step). The
// page at a cluster whose filters exceed its budget: budget.test.mjs.
//
//   npm ci --prefix web/e2e && cargo build -p xarchive && node --test web/e2e/
//
// Nothing here skips: a missing browser or binary fails with a message.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';

import {
  BINARY,
  accessibilityViolations,
  closeAll,
  getJson,
  openBrowser,
  overflowing,
  prerequisites,
  requestsDuring,
  seeText as see,
  segment,
  shot as snap,
  startCluster,
} from './harness.mjs';

let server = null; // { child, port, log, data }
let browser = null;
let page = null;
let pageErrors = [];

// ---------------------------------------------------------------- helpers

const seeText = (locator, patterns, timeout) => see(page, locator, patterns, timeout);
const shot = (name) => snap(page, name);

/** Lookup requests for `id` that the page sends while `work` runs. */
async function lookupsDuring(id, work) {
  const path = `/v1/lookup/${segment(id)}`;
  return (await requestsDuring(page, (url) => url.pathname === path, work)).map(String);
}

async function search(id) {
  await page.fill('#search-id', id);
  await page.click('#search-button');
}

// ---------------------------------------------------------------- setup

before(async () => {
  const chromium = await prerequisites();
  server = await startCluster();
  browser = await openBrowser(chromium);
  ({ page, pageErrors } = browser);
  await page.goto(`http://127.0.0.1:${server.port}/`);
});

after(() => closeAll(browser, server));

// ---------------------------------------------------------------- the page

test('the page shows the cluster: three domains up, their filters held in the browser', async () => {
  await seeText(page.locator('#served-by'), ['served by domain A']);
  const rows = page.locator('#cluster-rows');
  await seeText(rows, ['A', 'B', 'C', `127.0.0.1:${server.port + 2}`]);
  for (const name of ['A', 'B', 'C']) {
    const row = page.locator(`#cluster-rows tr[data-domain="${name}"]`);
    // 2,000 records: a filter sized for 2,048 of them, 2.5 KB held.
    await seeText(row, ['在线 up', '2,000', /v\d+ · 2\.5 KB/, /synced/]);
  }
  await seeText(page.locator('#cluster-summary'), ['3 domains', '6,000 records', 'filters of 3 of 3 domains']);
});

test('every epoch in a JSON body survives a JavaScript parser and a round trip to /v1/filter/delta', async () => {
  const bases = [0, 1, 2].map((i) => `http://127.0.0.1:${server.port + i}`);
  const headerEpoch = {};
  for (const [i, base] of bases.entries()) {
    const response = await fetch(`${base}/v1/filter`, { signal: AbortSignal.timeout(5000) });
    await response.arrayBuffer();
    headerEpoch['ABC'[i]] = response.headers.get('x-xarchive-epoch');
  }
  /** Asks `base` for the changes since `version` of `epoch`, as taken from JSON. */
  const delta = async (base, epoch, version) => {
    const response = await fetch(`${base}/v1/filter/delta?epoch=${epoch}&since=${version}`, { signal: AbortSignal.timeout(5000) });
    await response.arrayBuffer();
    return response.status;
  };
  for (const [i, base] of bases.entries()) {
    // JSON.parse keeps only doubles: a number above 2^53 would be rounded.
    const { body: stats } = await getJson(`${base}/v1/stats`);
    assert.equal(stats.filter.epoch, headerEpoch['ABC'[i]]);
    const { body: cluster } = await getJson(`${base}/v1/cluster`);
    for (const d of cluster.domains) {
      assert.equal(typeof d.epoch, 'string', JSON.stringify(d));
      assert.equal(d.epoch, headerEpoch[d.name], JSON.stringify(d));
      if (!d.self) assert.equal(d.replica_epoch, headerEpoch[d.name], JSON.stringify(d));
      assert.equal(await delta(d.address, d.epoch, d.version), 200, `${d.name} as seen by ${'ABC'[i]}`);
    }
    // The 409 of a wrong epoch names the current one, usable as it is.
    const refused = await getJson(`${base}/v1/filter/delta?epoch=1&since=0`);
    assert.equal(refused.status, 409);
    assert.equal(refused.body.code, 'snapshot_required');
    assert.equal(refused.body.epoch, headerEpoch['ABC'[i]]);
    assert.equal(await delta(base, refused.body.epoch, refused.body.version), 200);
  }
});

test('a record held by another domain is found, with its owner and the route', async () => {
  const base = `http://127.0.0.1:${server.port + 2}`;
  const { body: list } = await getJson(`${base}/v1/archives?limit=100`);
  const id = list.ids[42];
  const { status, body: record } = await getJson(`${base}/v1/archives/${segment(id)}`);
  assert.equal(status, 200);
  assert.equal(record.domain, 'C');

  await search(id);
  const result = page.locator('#result');
  await seeText(result, ['Found in domain C', record.title, id, 'Domain C', 'Asked domain C for the record.', /Server time [\d.]+ ms/]);
  await seeText(result, [`${record.metadata.fonds}`, '保管期限 Retention']);
  await shot('page-found');
  await shot('page');
});

test('an archive number typed with an ASCII dot and spaces is found, and a slip is answered with the nearest numbers held', async () => {
  const base = `http://127.0.0.1:${server.port + 2}`;
  const { body: list } = await getJson(`${base}/v1/archives?limit=100`);
  const id = list.ids[7];
  assert.ok(id.includes('·'), id);
  await search(` ${id.replace('·', '.')} `);
  await seeText(page.locator('#result'), ['Found in domain C', id]);

  // One digit too many: no domain holds it (the browser may say so by
  // itself); asked, domain A names the numbers it holds nearest to it.
  const { body: own } = await getJson(`http://127.0.0.1:${server.port}/v1/archives?limit=100`);
  const held = own.ids[10];
  await search(`${held.replace('·', '.')}0`);
  const result = page.locator('#result');
  await seeText(result, ['Not in any domain']);
  const ask = result.getByRole('button', { name: /Ask the servers anyway/ });
  if (await ask.count()) await ask.click();
  await seeText(result, ['Did you mean', held]);
  await result.getByRole('button', { name: held }).click();
  await seeText(result, ['Found in domain A', held]);
  await shot('page-typed');
});

test('an absent archive number is answered by the browser, without asking a server', async () => {
  // A filter held in the browser may say "maybe" of an absent number (a
  // false positive, about 1 in 100): then the page rightly asks the
  // servers, and the test tries another number.
  for (let attempt = 0; attempt < 8; attempt += 1) {
    const id = `档案/1999/不存在-${Date.now()}-${attempt}-🗂`;
    let text = '';
    const lookups = await lookupsDuring(id, async () => {
      await search(id);
      text = await seeText(page.locator('#result'), ['Not in any domain', id]);
    });
    if (text.includes('Answered by this browser')) {
      assert.ok(text.includes('No server was asked'), text);
      assert.deepEqual(lookups, [], 'no lookup request may be sent for the local answer');
      await shot('page-absent');
      return;
    }
    assert.ok(text.includes('The filters held in this browser said'), text);
  }
  assert.fail('eight absent numbers in a row were false positives of the filters held in the browser');
});

test('a record added through the page to domain B is found there', async () => {
  const id = `档案/2024/E2E-${Date.now()}`;
  await page.fill('#add-id', id);
  await page.selectOption('#add-domain', 'B');
  await page.fill('#add-title-input', '关于档案数字化项目验收的报告');
  await page.fill('input[name=fonds]', 'J900');
  await page.fill('input[name=year]', '2024');
  await page.selectOption('select[name=retention]', 'D30');
  await page.click('#add-button');
  await seeText(page.locator('#add-result'), [`Added ${id} in domain B`]);

  const { status, body } = await getJson(`http://127.0.0.1:${server.port + 1}/v1/archives/${segment(id)}`);
  assert.equal(status, 200, 'domain B holds the record');
  assert.equal(body.metadata.year, 2024);

  await search(id);
  await seeText(page.locator('#result'), ['Found in domain B', '关于档案数字化项目验收的报告', 'J900', '30 年 30 years']);
});

test('a record deleted through the page is then reported gone', async () => {
  const base = `http://127.0.0.1:${server.port + 2}`;
  const { body: list } = await getJson(`${base}/v1/archives?limit=100`);
  const id = list.ids[7];
  const { body: record } = await getJson(`${base}/v1/archives/${segment(id)}`);

  await page.fill('#delete-id', id);
  await page.click('#delete-button');
  await seeText(page.locator('#delete-result'), [`from domain C?`, record.title, 'This cannot be undone']);
  await page.click('#confirm-delete');
  await seeText(page.locator('#delete-result'), [`Deleted ${id} from domain C`]);

  const after = await getJson(`${base}/v1/archives/${segment(id)}`);
  assert.equal(after.status, 404, 'domain C no longer holds the record');

  await search(id);
  const text = await seeText(page.locator('#result'), ['Not in any domain', id]);
  assert.ok(!text.includes('Found in domain'), text);
  await shot('page-deleted');
});

test('when a filter cannot be loaded, the browser does not answer "not here" and says why', async () => {
  const blockedPort = String(server.port + 2);
  const blocked = (url) => url.port === blockedPort && url.pathname.startsWith('/v1/filter');
  await page.route(blocked, (route) => route.abort('connectionrefused'));
  try {
    // The reload repeats the search in the address (#search=…, the record
    // deleted above) once the page is ready; this test's search comes after
    // it and replaces it.
    await page.reload();
    await page.locator('body[data-ready="true"]').waitFor();
    const row = page.locator('#cluster-rows');
    await seeText(row, ["Domain C's filter could not be loaded: the domain could not be reached"]);
    await seeText(page.locator('#cluster-summary'), ['filters of 2 of 3 domains']);

    const id = `档案/1999/不存在-${Date.now()}-blocked`;
    const lookups = await lookupsDuring(id, async () => {
      await search(id);
      const text = await seeText(page.locator('#result'), [
        id,
        'Not in any domain',
        'searched the cluster',
        "The servers were asked because the browser could not answer by itself: Domain C's filter could not be loaded",
      ]);
      assert.ok(!text.includes('Answered by this browser'), text);
    });
    assert.equal(lookups.length, 1, 'the server was asked instead');
    await shot('page-filter-missing');
  } finally {
    await page.unroute(blocked);
  }
  await page.reload();
  await seeText(page.locator('#cluster-summary'), ['filters of 3 of 3 domains']);
});

test('a person is found in every domain holding their records by identity number, grouped by archive, the number never in a URL', async () => {
  // Sample person 250 has record 1003 of domain A and record 3 of B, none of C.
  const ids = ['J001-RS·2000-D30-01003', 'J101-RS·2000-Y-00003'];
  const { status, body: record } = await getJson(`http://127.0.0.1:${server.port}/v1/archives/${segment(ids[0])}`);
  assert.equal(status, 200);
  // Read by its ID, a record names its identity number withheld (only a
  // search returns it): the number comes from the sample records instead.
  assert.equal(record.keys, undefined);
  assert.deepEqual(record.keys_withheld, ['id_card', 'name_birth']);
  const sample = execFileSync(BINARY, ['sample', '--count', '1004', '--domain-index', '0'], { encoding: 'utf8' })
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line))
    .find((r) => r.id === ids[0]);
  const number = sample.keys.id_card;
  assert.match(number, /^\d{17}[\dX]$/);

  const urls = [];
  const listener = (request) => urls.push(request.url());
  page.on('request', listener);
  try {
    await seeText(page.locator('#person-panel'), ['Find a person']);
    await page.selectOption('#person-key-type', 'id_card');
    // As typed on a phone: the check letter in lower case.
    await page.fill('#person-value', number.toLowerCase());
    await page.click('#person-button');
    const result = page.locator('#person-result');
    const text = await seeText(result, ['Domain A (1)', 'Domain B (1)', ...ids, '2 records in 2 domains']);
    assert.ok(!text.includes('Domain C'), text);
    assert.equal(await result.getAttribute('data-state'), 'found');
  } finally {
    page.off('request', listener);
  }
  assert.ok(urls.some((u) => new URL(u).pathname === '/v1/search'), 'the search was sent');
  for (const u of [...urls, page.url()]) {
    assert.ok(!decodeURIComponent(u).includes(number.slice(6, 14)), `the number is in ${u}`);
  }
  // The public page never asks for the key filter (members only).
  assert.ok(!urls.some((u) => new URL(u).pathname.startsWith('/v1/filter/keys')), urls.join('\n'));

  // A wrong check digit is refused with why, never echoing the number.
  await page.fill('#person-value', `${number.slice(0, 17)}${number.endsWith('0') ? '1' : '0'}`);
  await page.click('#person-button');
  const text = await seeText(page.locator('#person-result'), ['check digit']);
  assert.ok(!text.includes(number.slice(0, 17)), text);
  await shot('page-person');
});

test('on a phone (390 px wide) the page does not scroll sideways', async () => {
  await page.setViewportSize({ width: 390, height: 844 });
  try {
    await page.goto(`http://127.0.0.1:${server.port}/`);
    await seeText(page.locator('#cluster'), ['A', 'B', 'C']);
    const { scroll, client } = await page.evaluate(() => ({
      scroll: document.documentElement.scrollWidth,
      client: document.documentElement.clientWidth,
    }));
    await shot('phone-390');
    assert.ok(scroll <= client, `the page is ${scroll} px wide in a ${client} px window`);
  } finally {
    await page.setViewportSize({ width: 1360, height: 1000 });
  }
});

test('at 1280 and at 390 px the domains table and the forms fit, and axe-core finds no WCAG 2.1 AA violation', async () => {
  try {
    for (const width of [1280, 390]) {
      await page.setViewportSize({ width, height: 900 });
      await page.goto(`http://127.0.0.1:${server.port}/`);
      await seeText(page.locator('#cluster'), ['A', 'B', 'C']);
      await page.locator('#person-key-type option').first().waitFor({ state: 'attached' });
      await shot(`page-${width}`);
      const cut = await overflowing(page, ['html', '#cluster-panel .table-wrap', 'select', 'input']);
      assert.deepEqual(cut, [], `at ${width} px`);
      // The table's scrolling region, should it scroll, is reachable by keyboard.
      assert.equal(await page.locator('#cluster-panel .table-wrap').getAttribute('tabindex'), '0');
      assert.deepEqual(await accessibilityViolations(page), [], `at ${width} px`);
    }
  } finally {
    await page.setViewportSize({ width: 1360, height: 1000 });
  }
});

test('no script error happened on the page', () => {
  assert.deepEqual(pageErrors, []);
});
