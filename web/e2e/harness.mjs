// What the Chromium tests share: a real `xarchive up` on free loopback ports, Debian's Chromium driven by playwright-core, and waiting for what a person would see.
//
// Nothing here skips: a missing browser, binary or playwright-core fails
// with a message saying how to get it.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, openSync, closeSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
export const BINARY = process.env.XARCHIVE_BIN ?? join(ROOT, 'target', 'debug', 'xarchive');
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
/** Screenshots and the domains' logs. */
export const ARTIFACTS = join(ROOT, 'test-artifacts');
const CHROMIUM_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
/** How long a step may take to show what it should. */
export const STEP_MS = 20_000;

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function getJson(url) {
  const response = await fetch(url, { signal: AbortSignal.timeout(5000) });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

/** The ID as one path segment, as the Rust client writes it. */
export const segment = (id) => encodeURIComponent(id).replace(/[.!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

function portFree(port) {
  return new Promise((done) => {
    const probe = createServer();
    probe.once('error', () => done(false));
    probe.listen(port, '127.0.0.1', () => probe.close(() => done(true)));
  });
}

/** A first port with the `count - 1` after it also free (domains A, B, C…). */
async function freePorts(count) {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = 20000 + Math.floor(Math.random() * 40000);
    let free = true;
    for (let i = 0; i < count && free; i++) free = await portFree(port + i);
    if (free) return port;
  }
  throw new Error(`no ${count} consecutive free loopback ports found`);
}

/** Fails before anything starts when the browser, the binary or playwright-core is missing. */
export async function prerequisites() {
  mkdirSync(ARTIFACTS, { recursive: true });
  if (!existsSync(CHROMIUM)) {
    throw new Error(`Chromium is not at ${CHROMIUM}: run scripts/install-deps.sh (Debian's chromium package), or set CHROMIUM`);
  }
  if (!existsSync(BINARY)) {
    throw new Error(`the xarchive binary is not at ${BINARY}: run cargo build -p xarchive first (scripts/test.sh does)`);
  }
  try {
    return (await import('playwright-core')).chromium;
  } catch (e) {
    throw new Error(`playwright-core is not installed: run npm ci --prefix web/e2e (${e.message})`);
  }
}

/**
 * Starts `xarchive up` (three domains, `records` sample records each; `env`
 * added to its environment, such as `XARCHIVE_PAGE__FILTER_BYTES`) in a
 * temporary directory, and waits until every domain answers, holds its
 * records and sees the others. Its output goes to ARTIFACTS/`log`.
 * Returns `{ child, port, log, data }`: `port` is domain A's; B and C follow.
 */
export async function startCluster({ records = 2000, env = {}, log = 'xarchive-up.log' } = {}) {
  const data = mkdtempSync(join(tmpdir(), 'xarchive-e2e-data-'));
  const port = await freePorts(3);
  const logPath = join(ARTIFACTS, log);
  const fd = openSync(logPath, 'w');
  const child = spawn(BINARY, ['up', '--data', data, '--port', String(port), '--records', String(records)], {
    cwd: ROOT,
    stdio: ['ignore', fd, fd],
    env: { ...process.env, XARCHIVE_LOG: process.env.XARCHIVE_LOG ?? 'warn', ...env },
  });
  closeSync(fd);
  let exited = null;
  child.on('exit', (code, signal) => {
    exited = { code, signal };
  });
  const server = { child, port, log: logPath, data };
  const deadline = Date.now() + 90_000;
  for (;;) {
    if (exited) {
      throw new Error(`xarchive up exited early (${JSON.stringify(exited)}); its output:\n${readFileSync(logPath, 'utf8')}`);
    }
    if (Date.now() > deadline) {
      throw new Error(`xarchive up did not become ready within 90 s; its output:\n${readFileSync(logPath, 'utf8')}`);
    }
    try {
      const { status, body } = await getJson(`http://127.0.0.1:${port}/v1/cluster`);
      const domains = body?.domains ?? [];
      const ready = status === 200 && domains.length === 3 && domains.every((d) => d.up && (d.self || d.current));
      if (ready) {
        const stats = await Promise.all([0, 1, 2].map((i) => getJson(`http://127.0.0.1:${port + i}/v1/stats`)));
        if (stats.every((s) => s.status === 200 && s.body.records === records)) return server;
      }
    } catch {
      // not listening yet
    }
    await sleep(200);
  }
}

/** Stops what startCluster started (SIGTERM, then SIGKILL after 10 s) and removes its data. */
export async function stopCluster(server) {
  if (!server) return;
  const { child } = server;
  if (child.exitCode === null && child.signalCode === null) {
    const gone = new Promise((r) => child.once('exit', r));
    process.kill(child.pid, 'SIGTERM');
    const stopped = await Promise.race([gone.then(() => true), sleep(10_000).then(() => false)]);
    if (!stopped) {
      process.kill(child.pid, 'SIGKILL');
      await gone;
    }
  }
  rmSync(server.data, { recursive: true, force: true });
}

/** Closes the browser, if it opened, and stops the cluster whatever the browser did: each test file's `after`. */
export async function closeAll(browser, server) {
  try {
    if (browser) await browser.close();
  } finally {
    await stopCluster(server);
  }
}

/**
 * Chromium with a profile of its own: `{ context, page, pageErrors, close }`.
 * Script errors on the page are collected in `pageErrors`.
 */
export async function openBrowser(chromium) {
  const profile = mkdtempSync(join(tmpdir(), 'xarchive-e2e-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_FLAGS,
    viewport: { width: 1360, height: 1000 },
    locale: 'zh-CN',
  });
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(STEP_MS);
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  const close = async () => {
    try {
      await context.close();
    } finally {
      rmSync(profile, { recursive: true, force: true });
    }
  };
  return { context, page, pageErrors, close };
}

/** A full-page screenshot in ARTIFACTS. */
export async function shot(page, name) {
  if (page) await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
}

/**
 * Waits until `locator` is visible and its rendered text (innerText: what
 * is laid out on screen, not hidden markup) matches every pattern.
 */
export async function seeText(page, locator, patterns, timeout = STEP_MS) {
  const deadline = Date.now() + timeout;
  let text = '';
  for (;;) {
    if (await locator.isVisible()) {
      text = await locator.innerText();
      if (patterns.every((p) => (typeof p === 'string' ? text.includes(p) : p.test(text)))) return text;
    }
    if (Date.now() > deadline) {
      await shot(page, 'failure');
      assert.fail(`expected to see ${patterns.map(String).join(' and ')} but the page shows:\n${text || '(nothing visible)'}`);
    }
    await sleep(100);
  }
}

/** axe-core's rules of WCAG 2.0 and 2.1, levels A and AA. */
const WCAG_21_AA = ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'];

/**
 * What axe-core (the version web/e2e/package.json pins) finds against
 * WCAG 2.1 AA on the page as it is now: its violations, each as
 * "rule: what (the elements)".
 */
export async function accessibilityViolations(page) {
  // Evaluated through the driver, which the page's Content-Security-Policy
  // (script-src 'self') does not govern, as an injected <script> would be.
  if (!(await page.evaluate(() => typeof window.axe === 'object'))) {
    await page.evaluate(readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8'));
  }
  const found = await page.evaluate(
    (tags) => window.axe.run(document, { runOnly: { type: 'tag', values: tags }, resultTypes: ['violations'] }),
    WCAG_21_AA,
  );
  return found.violations.map((v) => `${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(' ')).join('; ')})`);
}

/**
 * Elements whose content is wider than what shows them, as
 * `selector (needed > shown)`: content cut or scrolling sideways; for a
 * <select>, its chosen option's text beside the arrow (a select's own
 * scroll width does not tell).
 */
export async function overflowing(page, selectors) {
  return page.evaluate((list) => list.flatMap((selector) => [...document.querySelectorAll(selector)]
    .filter((e) => e.offsetParent !== null)
    .map((e) => {
      if (e.tagName !== 'SELECT') return [e.scrollWidth, e.clientWidth];
      const probe = document.createElement('span');
      probe.style.cssText = 'position:absolute;visibility:hidden;white-space:nowrap';
      probe.style.font = getComputedStyle(e).font;
      probe.textContent = e.selectedOptions[0]?.textContent ?? '';
      document.body.append(probe);
      const style = getComputedStyle(e);
      // The text, the padding and about 24 px for the arrow.
      const needed = probe.offsetWidth + parseFloat(style.paddingLeft) + parseFloat(style.paddingRight) + 24;
      probe.remove();
      return [Math.ceil(needed), e.clientWidth];
    })
    .map(([needed, shown], i) => ({ needed, shown, i }))
    .filter(({ needed, shown }) => needed > shown + 1)
    .map(({ needed, shown, i }) => `${selector}[${i}] (${needed} > ${shown})`)), selectors);
}

/** The URLs of the requests the page sends while `work` runs, those `keep` keeps. */
export async function requestsDuring(page, keep, work) {
  const seen = [];
  const listener = (request) => {
    const url = new URL(request.url());
    if (keep(url)) seen.push(url);
  };
  page.on('request', listener);
  try {
    await work();
  } finally {
    page.off('request', listener);
  }
  return seen;
}
