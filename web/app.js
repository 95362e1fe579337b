// The page: search every domain, see the cluster, add and delete records.
//
// The page is served by one domain but talks to all of them: it reads the
// cluster from the serving domain (/v1/cluster), then each domain's filter
// and stats at its address. The filters are kept current with deltas, and
// a search for an archive number that no filter can hold is answered here,
// at once; anything else is asked of the serving domain (/v1/lookup).

import { DomainRequestError, FilterFormatError, syncFilter } from './xarchive-filter.js';
import {
  METADATA_LABELS,
  checkId,
  describeRoute,
  encodeIdSegment,
  formatAgo,
  formatBytes,
  formatCount,
  formatMs,
  formatPercent,
  formatRate,
  metadataValue,
  plainApiError,
} from './util.js';

/** How often the cluster, the stats and the filters are refreshed. */
const REFRESH_MS = 3000;
/** The list of domains fetched longer ago than this is not trusted for a "not here". */
const FRESH_MS = 15000;
/** A filter copy synced longer ago than this is not trusted for a "not here". */
const LOCAL_FRESH_MS = 5000;
/** How long a search waits for the filters to be brought up to date. */
const SEARCH_SYNC_MS = 1500;
/** Requests to a domain give up after this long. */
const TIMEOUT_MS = 8000;
/**
 * Largest attachment read from disk: the domains' default content limit
 * (`limits.max_content_bytes`, 8 MiB); a domain configured higher still
 * refuses what is over its own limit with a clear error.
 */
const MAX_ATTACHMENT = 8 * 1024 * 1024;

const state = {
  served: null,
  clusterAt: 0,
  clusterError: null,
  /** Whether the serving domain's coordinator confirms its list of domains. */
  membershipConfirmed: false,
  /** name -> { name, address, self, info, stats, statsError, filter, filterError, syncedAt, syncing } */
  domains: new Map(),
  refreshing: false,
};

const $ = (id) => document.getElementById(id);

/** Replaces an element's children, leaving out the empty ones. */
function show(el, ...nodes) {
  el.replaceChildren(...nodes.flat(Infinity).filter((n) => n !== null && n !== undefined && n !== false));
}

/** Builds an element: h('p', { class: 'x' }, 'text', child, ...). */
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

// ---------------------------------------------------------------- requests

/**
 * Calls a domain's API. Resolves to `{ status, body, ms }` for any HTTP
 * answer; rejects with `{ status: 0, message }` when the domain could not
 * be reached.
 */
/** The API token, kept for this browser tab only. */
const TOKEN_KEY = 'xarchive-token';

function authHeaders() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { authorization: `Bearer ${token}` } : {};
}

/** `fetch` with the token added, for the filter reader. */
function fetchWithToken(url, options = {}) {
  return fetch(url, { ...options, headers: { ...(options.headers || {}), ...authHeaders() } });
}

/** Shows the token field, with why it is needed. */
function askForToken(note) {
  $('token-form').hidden = false;
  $('token-note').textContent = note;
}

async function callApi(base, path, { method = 'GET', body } = {}) {
  const started = performance.now();
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), TIMEOUT_MS);
  let response;
  try {
    response = await fetch(base + path, {
      method,
      cache: 'no-store',
      signal: controller.signal,
      headers: { ...authHeaders(), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    clearTimeout(timer);
    const why = e.name === 'AbortError' ? `no answer within ${TIMEOUT_MS / 1000} s` : e.message;
    throw { status: 0, message: why };
  }
  let parsed = null;
  try {
    const text = await response.text();
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = null;
  } finally {
    clearTimeout(timer);
  }
  if (response.status === 401) {
    askForToken('This domain needs an API token. 该档案域需要访问令牌。');
  } else if (response.status === 403) {
    askForToken('This token may not do that. 当前令牌无此权限。');
  }
  return { status: response.status, body: parsed, ms: performance.now() - started };
}

function apiError(answer) {
  const body = answer.body || {};
  return { status: answer.status, code: body.code || null, message: body.message || '' };
}

function addressOf(name) {
  return state.domains.get(name)?.address ?? null;
}

// ---------------------------------------------------------------- cluster

async function refreshCluster() {
  let answer;
  try {
    answer = await callApi('', '/v1/cluster');
  } catch (e) {
    state.clusterError = 'The domain serving this page could not be reached. 无法连接本页所在的档案域。';
    return;
  }
  if (answer.status !== 200 || !answer.body || !Array.isArray(answer.body.domains)) {
    state.clusterError = `The cluster view could not be read (HTTP ${answer.status}).`;
    return;
  }
  state.clusterError = null;
  state.clusterAt = Date.now();
  state.served = answer.body.domain;
  state.membershipConfirmed = answer.body.connected === true;
  const seen = new Set();
  for (const info of answer.body.domains) {
    seen.add(info.name);
    const d = state.domains.get(info.name) ?? {
      name: info.name,
      filter: null,
      filterError: null,
      syncedAt: 0,
      stats: null,
      statsError: null,
      syncing: null,
    };
    if (d.address && d.address !== info.address) {
      d.filter = null; // moved: start again from a snapshot
      d.syncedAt = 0;
    }
    d.address = info.address;
    d.self = Boolean(info.self);
    d.info = info;
    state.domains.set(info.name, d);
  }
  for (const name of [...state.domains.keys()]) if (!seen.has(name)) state.domains.delete(name);
}

async function refreshStats(d) {
  try {
    const answer = await callApi(d.address, '/v1/stats');
    if (answer.status === 200 && answer.body) {
      d.stats = answer.body;
      d.statsError = null;
    } else {
      d.statsError = plainApiError(d.name, apiError(answer));
    }
  } catch {
    d.statsError = plainApiError(d.name, null);
  }
}

/**
 * Brings the browser's copy of a domain's filter up to date (a delta, or
 * the snapshot the first time). One sync per domain at a time: a caller
 * arriving during one waits for it.
 */
function refreshFilter(d, timeout = TIMEOUT_MS) {
  if (d.syncing) return d.syncing;
  const started = Date.now();
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), timeout);
  d.syncing = (async () => {
    try {
      const { filter } = await syncFilter(d.address, d.filter, {
        signal: controller.signal,
        fetch: fetchWithToken,
      });
      d.filter = filter;
      d.filterError = null;
      // The copy is as of the request, not of its answer.
      d.syncedAt = started;
    } catch (e) {
      d.filterError = filterProblem(d.name, e);
    } finally {
      clearTimeout(timer);
      d.syncing = null;
    }
  })();
  return d.syncing;
}

/**
 * Before a search: every copy synced in the last moment, so that a record
 * written anywhere before the search is seen. Small delta requests, never
 * a lookup.
 */
async function freshen() {
  const started = performance.now();
  const stale = [...state.domains.values()].filter((d) => !d.filter || d.filterError || Date.now() - d.syncedAt > 300);
  await Promise.all(stale.map((d) => refreshFilter(d, SEARCH_SYNC_MS)));
  return { ms: performance.now() - started, synced: stale.length };
}

function filterProblem(name, e) {
  const what = `Domain ${name}'s filter could not be loaded`;
  if (e instanceof FilterFormatError) {
    return `${what}: the bytes it sent are damaged or of an unknown kind (${e.message})`;
  }
  if (e instanceof DomainRequestError && e.status === 0) return `${what}: the domain could not be reached`;
  if (e && e.name === 'AbortError') return `${what}: no answer in time`;
  return `${what}: ${e && e.message ? e.message : e}`;
}

async function refreshAll() {
  if (state.refreshing) return;
  state.refreshing = true;
  try {
    await refreshCluster();
    await Promise.all([...state.domains.values()].map((d) => Promise.all([refreshStats(d), refreshFilter(d)])));
  } finally {
    state.refreshing = false;
    renderCluster();
  }
}

/** After a write at one domain: its filter and stats now, not at the next tick. */
async function refreshDomain(name) {
  const d = state.domains.get(name);
  if (!d) return;
  await Promise.all([refreshStats(d), refreshFilter(d)]);
  renderCluster();
}

function renderCluster() {
  const served = state.served;
  $('served-by').textContent = served
    ? `This page is served by domain ${served}. 本页由档案域 ${served} 提供。`
    : 'Connecting… 正在连接…';
  const banner = $('banner');
  if (state.clusterError) {
    banner.hidden = false;
    banner.className = 'banner error';
    banner.textContent = state.clusterError;
  } else {
    banner.hidden = true;
  }

  const domains = [...state.domains.values()].sort((a, b) => a.name.localeCompare(b.name, 'en', { numeric: true }));
  const rows = domains.map((d) => {
    const info = d.info || {};
    const stats = d.stats;
    const filterStats = stats?.filter;
    const up = info.up !== false && !d.statsError;
    const kind = info.kind ?? filterStats?.kind;
    const status = h('div', {},
      up ? h('span', { class: 'pill up' }, '在线 up') : h('span', { class: 'pill down' }, '离线 down'),
      kind ? h('div', { class: 'muted tiny' }, kind === 'cuckoo' ? 'cuckoo filter' : 'counting Bloom') : null);
    const selfNote = d.self ? h('div', { class: 'tiny self' }, 'serves this page') : null;
    let lag;
    if (d.self) lag = h('span', { class: 'muted' }, '—');
    else if (info.lag === 0 && info.current) lag = h('span', { class: 'ok' }, '0 · 最新 current');
    else if (typeof info.lag === 'number') lag = h('span', { class: 'warn' }, `${formatCount(info.lag)} behind 落后`);
    else lag = h('span', { class: 'warn' }, info.replica_version == null ? 'no copy yet 尚无副本' : 'unknown 未知');

    let copy;
    if (d.filter) {
      const ago = Date.now() - d.syncedAt;
      copy = h('div', {},
        h('span', { class: d.filterError || ago > FRESH_MS ? 'warn' : 'ok' },
          `v${d.filter.version} · ${formatBytes(d.filter.byteLength)}`),
        h('div', { class: 'muted tiny' }, `synced ${formatAgo(ago)}`));
    } else {
      copy = h('span', { class: 'warn' }, d.filterError ? 'not loaded 未加载' : 'loading… 加载中');
    }
    const problem = d.filterError
      ? `${d.filterError}. Searches ask the servers instead. 无法加载档案域 ${d.name} 的过滤器，检索将询问服务器。`
      : d.statsError;
    return [
      h('tr', { 'data-domain': d.name, class: up ? '' : 'is-down' },
        h('th', { scope: 'row' }, h('div', { class: 'domain-name' }, d.name), h('div', { class: 'muted tiny' }, d.address), selfNote),
        h('td', {}, status),
        h('td', { class: 'num' }, stats ? formatCount(stats.records) : '—'),
        h('td', { class: 'num' }, filterStats ? formatPercent(filterStats.fill_ratio) : '—'),
        h('td', { class: 'num' }, filterStats ? formatRate(filterStats.estimated_fpr) : '—'),
        h('td', {}, lag),
        h('td', {}, copy)),
      problem ? h('tr', { class: 'problem' }, h('td', { colspan: '7' }, problem)) : null,
    ];
  });
  $('cluster-rows').replaceChildren(...rows.flat().filter(Boolean));

  const loaded = domains.filter((d) => d.filter).length;
  const records = domains.reduce((n, d) => n + (d.stats ? Number(d.stats.records) : 0), 0);
  const bytes = domains.reduce((n, d) => n + (d.filter ? d.filter.byteLength : 0), 0);
  $('cluster-summary').textContent = domains.length === 0
    ? (state.clusterError ? 'No domains known. 未知档案域。' : 'Loading… 加载中…')
    : `${domains.length} domains · ${formatCount(records)} records · filters of ${loaded} of ${domains.length} domains held in this browser (${formatBytes(bytes)}). ` +
      `${domains.length} 个档案域，共 ${formatCount(records)} 条记录。`;

  // The domain choices change only with the cluster (not every second,
  // which would close the list while someone is choosing).
  const select = $('add-domain');
  const key = domains.map((d) => `${d.name}${d.self ? '*' : ''}`).join(',');
  if (select.dataset.key !== key) {
    const chosen = select.value || served;
    select.replaceChildren(...domains.map((d) =>
      h('option', { value: d.name, selected: d.name === chosen }, `${d.name}${d.self ? ' (this page’s domain)' : ''}`)));
    select.dataset.key = key;
  }
}

// ---------------------------------------------------------------- local answer

/**
 * What the filters held here say about `id`: 'absent' only when the
 * cluster view is fresh and every domain's filter is loaded, fresh and
 * says no. Otherwise 'ask', with the reasons.
 */
function localAnswer(id) {
  const started = performance.now();
  const domains = [...state.domains.values()];
  const reasons = [];
  const maybe = [];
  if (state.clusterError || Date.now() - state.clusterAt > FRESH_MS) {
    reasons.push('the list of domains is not up to date');
  }
  if (!state.membershipConfirmed) {
    reasons.push(`domain ${state.served ?? ''} cannot confirm the list of domains with its coordinator`);
  }
  if (domains.length === 0) reasons.push('no domain is known yet');
  for (const d of domains) {
    if (!d.filter) {
      reasons.push(d.filterError || `domain ${d.name}'s filter is still loading`);
      continue;
    }
    if (d.filterError) {
      reasons.push(d.filterError);
    } else if (Date.now() - d.syncedAt > LOCAL_FRESH_MS) {
      reasons.push(`domain ${d.name}'s filter in this browser was last brought up to date ${formatAgo(Date.now() - d.syncedAt)}`);
    }
    if (d.filter.mightContain(id)) maybe.push(d.name);
  }
  const ms = performance.now() - started;
  if (reasons.length === 0 && maybe.length === 0) {
    return { verdict: 'absent', ms, count: domains.length };
  }
  return { verdict: 'ask', ms, reasons, maybe };
}

// ---------------------------------------------------------------- search

let searchSeq = 0;

async function search(raw, { pushHash = true } = {}) {
  const out = $('result');
  const checked = checkId(raw);
  if (checked.error) {
    show(out, h('div', { class: 'card error', role: 'alert' }, checked.error));
    return;
  }
  const id = checked.id;
  const seq = ++searchSeq;
  if (pushHash) history.replaceState(null, '', `#search=${encodeURIComponent(id)}`);
  // The previous answer goes at once: it is about another ID, and bringing
  // the filters up to date first may take a moment.
  show(out, h('div', { class: 'card pending' }, `Searching for ${id}… 检索中…`));
  const started = performance.now();
  const sync = await freshen();
  if (seq !== searchSeq) return;
  const local = localAnswer(id);
  if (local.verdict === 'absent') {
    const synced = sync.synced > 0
      ? ` Its copies were brought up to date first (${sync.synced} small delta request${sync.synced > 1 ? 's' : ''}, ${formatMs(sync.ms)}).`
      : '';
    show(out, h('div', { class: 'card absent', 'data-answer': 'browser-absent' },
      h('h3', {}, '不在任何档案域 ', h('span', {}, 'Not in any domain')),
      h('p', { class: 'id-line' }, h('code', {}, id)),
      h('p', {}, `Answered by this browser in ${formatMs(local.ms)}: the filters of all ${local.count} domains say that none of them holds this archive number. No server was asked to look it up.`),
      h('p', { class: 'muted' }, `由浏览器直接答复：${local.count} 个档案域的过滤器均表明不持有该档案号，未向服务器查询。`),
      h('p', { class: 'muted tiny' }, `A filter never misses a record it holds, so "no" from every domain's filter is certain.${synced}`),
      h('p', {}, h('button', {
        type: 'button',
        class: 'link',
        onclick: () => askServer(id, ++searchSeq, performance.now(), { forced: true }),
      }, 'Ask the servers anyway 仍然询问服务器'))));
    return;
  }
  await askServer(id, seq, started, { local });
}

async function askServer(id, seq, started, { local = null, forced = false } = {}) {
  const out = $('result');
  if (forced) show(out, h('div', { class: 'card pending' }, `Asking domain ${state.served ?? ''}… 询问服务器…`));
  let answer;
  try {
    answer = await callApi('', `/v1/lookup/${encodeIdSegment(id)}`);
  } catch (e) {
    if (seq !== searchSeq) return;
    show(out, h('div', { class: 'card error', role: 'alert' },
      `The domain serving this page could not be reached, so the search could not be made (${e.message}). 无法连接本页所在的档案域。`));
    return;
  }
  if (seq !== searchSeq) return; // a newer search replaced this one
  const total = performance.now() - started;
  const served = state.served ?? '?';
  const why = local && local.reasons && local.reasons.length > 0
    ? h('p', { class: 'note' }, `The servers were asked because the browser could not answer by itself: ${local.reasons.join('; ')}. 浏览器无法独立答复，已询问服务器。`)
    : null;
  const hint = local && local.maybe && local.maybe.length > 0
    ? `The filters held in this browser said domain${local.maybe.length > 1 ? 's' : ''} ${local.maybe.join(', ')} may hold it.`
    : null;
  const timing = (route) => h('p', { class: 'muted timing' },
    `Server time ${formatMs(route?.elapsed_ms)} · ${route?.remote_calls ?? 0} call${route?.remote_calls === 1 ? '' : 's'} between domains · ${formatMs(total)} in all, seen from this browser. ` +
    `耗时 ${formatMs(total)}。`);
  const routeList = (route, opts) => {
    const steps = describeRoute(route, { served, ...opts });
    return h('details', { class: 'route', open: true },
      h('summary', {}, '检索路径 Route the lookup took'),
      h('ol', {}, steps.map((s) => h('li', {}, s))),
      hint ? h('p', { class: 'muted tiny' }, hint) : null);
  };

  if (answer.status === 200 && answer.body && answer.body.record) {
    const { record, owner, route } = answer.body;
    show(out, recordCard(record, owner, route, routeList, timing), why);
    return;
  }
  const body = answer.body || {};
  if (answer.status === 404 && body.code === 'not_found') {
    show(out, h('div', { class: 'card absent', 'data-answer': 'server-absent' },
      h('h3', {}, '不在任何档案域 ', h('span', {}, 'Not in any domain')),
      h('p', { class: 'id-line' }, h('code', {}, id)),
      h('p', {}, `Domain ${served} searched the cluster: no domain holds this archive number. 经检索，任何档案域均无此档案号。`),
      routeList(body.route, { found: false }),
      timing(body.route)), why);
    return;
  }
  if (answer.status === 503 && body.code === 'unavailable') {
    const missing = (body.unavailable || []).join(', ');
    show(out, h('div', { class: 'card warning', role: 'alert', 'data-answer': 'unavailable' },
      h('h3', {}, '暂时无法确定 ', h('span', {}, 'Not certain')),
      h('p', { class: 'id-line' }, h('code', {}, id)),
      h('p', {}, `Not found in the domains that answered, but domain${body.unavailable?.length > 1 ? 's' : ''} ${missing} could not be reached and may hold it. Try again when ${body.unavailable?.length > 1 ? 'they are' : 'it is'} back.`),
      h('p', { class: 'muted' }, `已答复的档案域中没有该档案，但无法连接档案域 ${missing}，档案可能在那里。`),
      routeList(body.route, { found: false }),
      timing(body.route)), why);
    return;
  }
  if (answer.status === 503 && body.code === 'not_ready') {
    show(out, h('div', { class: 'card warning', role: 'alert', 'data-answer': 'not-ready' },
      h('h3', {}, '暂时无法确定 ', h('span', {}, 'Not certain')),
      h('p', { class: 'id-line' }, h('code', {}, id)),
      h('p', {}, `Not found in any domain that domain ${served} knows of, but it cannot confirm the list of domains right now (it has just started, or its coordinator cannot be reached), so a domain it does not know of may hold it. Try again in a moment.`),
      h('p', { class: 'muted' }, `已知档案域中没有该档案，但档案域 ${served} 暂时无法确认档案域名单，档案可能在其他档案域。请稍后再试。`),
      routeList(body.route, { found: false }),
      timing(body.route)), why);
    return;
  }
  show(out, h('div', { class: 'card error', role: 'alert' }, plainApiError(served, apiError(answer))), why);
}

function recordCard(record, owner, route, routeList, timing) {
  const ownerAddress = addressOf(owner);
  const order = Object.keys(METADATA_LABELS);
  const rank = (k) => (order.includes(k) ? order.indexOf(k) : order.length);
  const meta = Object.entries(record.metadata || {}).sort(([a], [b]) => rank(a) - rank(b) || a.localeCompare(b));
  const rows = [
    ['档案号 Archive number', h('code', {}, record.id)],
    ['档案域 Held by', h('span', {}, h('strong', { 'data-owner': owner }, `Domain ${owner}`), ownerAddress ? h('span', { class: 'muted' }, ` · ${ownerAddress}`) : null)],
    ...meta.map(([k, v]) => [METADATA_LABELS[k] ?? k, metadataValue(k, v)]),
    ['创建 Created', formatTime(record.created_at)],
    ['更新 Updated', formatTime(record.updated_at)],
  ];
  if (record.content) {
    const size = Math.floor(record.content.length / 4) * 3 - (record.content.match(/=+$/)?.[0].length ?? 0);
    rows.push(['附件 Attachment', h('a', {
      href: '#',
      onclick: (ev) => {
        ev.preventDefault();
        download(record.id, record.content);
      },
    }, `Download (${formatBytes(size)}) 下载`)]);
  }
  return h('div', { class: 'card found', 'data-answer': 'found' },
    h('p', { class: 'eyebrow' }, `找到 Found in domain ${owner}`),
    h('h3', { class: 'record-title' }, record.title || '(untitled 无题名)'),
    h('dl', { class: 'fields' }, rows.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)])),
    routeList(route, { found: true, owner }),
    timing(route));
}

function formatTime(iso) {
  const t = new Date(iso);
  if (Number.isNaN(t.getTime())) return iso ?? '—';
  return t.toLocaleString('zh-CN', { hour12: false });
}

function download(id, b64) {
  const bin = atob(b64);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  const url = URL.createObjectURL(new Blob([bytes]));
  const a = h('a', { href: url, download: id.replace(/[\\/:*?"<>|]+/g, '_') });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

// ---------------------------------------------------------------- add

async function readAttachment(file) {
  if (!file) return undefined;
  if (file.size > MAX_ATTACHMENT) {
    throw new Error(`The attachment is ${formatBytes(file.size)}; the limit is ${formatBytes(MAX_ATTACHMENT)}. 附件过大。`);
  }
  const bytes = new Uint8Array(await file.arrayBuffer());
  let bin = '';
  for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(bin);
}

async function addRecord(form) {
  const out = $('add-result');
  const say = (cls, ...text) => show(out, h('div', { class: `card ${cls}`, role: cls === 'error' ? 'alert' : null }, ...text));
  const checked = checkId(form.id.value);
  if (checked.error) return say('error', checked.error);
  const id = checked.id;
  const title = form.title.value.trim();
  if (!title) return say('error', 'Please give the record a title. 请填写题名。');
  const domain = form.domain.value;
  const address = addressOf(domain);
  if (!address) return say('error', 'Please choose a domain to store the record in. 请选择档案域。');

  const metadata = {};
  for (const key of ['fonds', 'department', 'retention']) {
    const v = form[key].value.trim();
    if (v) metadata[key] = v;
  }
  const year = form.year.value.trim();
  if (year) {
    if (!/^\d{1,4}$/.test(year)) return say('error', 'The year should be a number such as 2024. 年度应为数字，例如 2024。');
    metadata.year = Number(year);
  }
  const extra = form.extra.value.trim();
  if (extra) {
    let parsed;
    try {
      parsed = JSON.parse(extra);
    } catch (e) {
      return say('error', `Other metadata is not valid JSON (${e.message}). Write it like {"pages": 12}. 其他元数据格式有误。`);
    }
    if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) {
      return say('error', 'Other metadata must be a JSON object, like {"pages": 12}. 其他元数据应为 JSON 对象。');
    }
    Object.assign(metadata, parsed);
  }
  let content;
  try {
    content = await readAttachment(form.content.files?.[0]);
  } catch (e) {
    return say('error', e.message);
  }

  // Archive numbers are unique across domains: refuse to hold one twice.
  say('pending', `Checking that ${id} is not held by another domain… 正在检查档案号是否已存在…`);
  let existing;
  try {
    existing = await callApi('', `/v1/lookup/${encodeIdSegment(id)}`);
  } catch {
    return say('error', plainApiError(state.served ?? '?', null));
  }
  if (existing.status === 200 && existing.body?.owner && existing.body.owner !== domain) {
    const owner = existing.body.owner;
    return say('error', `Archive number ${id} is already held by domain ${owner}. Numbers must be unique across domains: delete it there first, or choose domain ${owner} to replace it. ` +
      `档案号已存在于档案域 ${owner}。`);
  }
  if (existing.status === 503) {
    const missing = (existing.body?.unavailable || []).join(', ');
    return say('error', `Could not check every domain (${missing} could not be reached), so the record was not saved: the same number might already be held there. 无法确认档案号是否重复，未保存。`);
  }
  if (existing.status !== 200 && existing.status !== 404) {
    return say('error', plainApiError(state.served ?? '?', apiError(existing)));
  }

  say('pending', `Saving in domain ${domain}… 保存中…`);
  let answer;
  try {
    answer = await callApi(address, `/v1/archives/${encodeIdSegment(id)}`, {
      method: 'PUT',
      body: { title, metadata, ...(content === undefined ? {} : { content }) },
    });
  } catch {
    return say('error', plainApiError(domain, null));
  }
  if (answer.status === 201 || answer.status === 200) {
    const verb = answer.status === 201 ? 'Added' : 'Replaced';
    say('success', `${verb} ${id} in domain ${domain}. ${answer.status === 201 ? '已新增' : '已更新'}。 `,
      h('button', { type: 'button', class: 'link', onclick: () => { $('search-id').value = id; search(id); } }, 'Search for it 检索'));
    form.reset();
    await refreshDomain(domain);
    return;
  }
  say('error', plainApiError(domain, apiError(answer)));
}

// ---------------------------------------------------------------- delete

async function findForDelete(raw) {
  const out = $('delete-result');
  const say = (cls, ...text) => show(out, h('div', { class: `card ${cls}`, role: cls === 'error' ? 'alert' : null }, ...text));
  const checked = checkId(raw);
  if (checked.error) return say('error', checked.error);
  const id = checked.id;
  say('pending', `Finding ${id}… 查找中…`);
  let answer;
  try {
    answer = await callApi('', `/v1/lookup/${encodeIdSegment(id)}`);
  } catch {
    return say('error', plainApiError(state.served ?? '?', null));
  }
  if (answer.status === 404) return say('absent', `No domain holds ${id}; there is nothing to delete. 任何档案域均无此档案，无需删除。`);
  if (answer.status !== 200 || !answer.body?.record) {
    if (answer.status === 503) {
      return say('error', `${id} was not found in the domains that answered, and ${(answer.body?.unavailable || []).join(', ')} could not be reached. Nothing was deleted. 未删除。`);
    }
    return say('error', plainApiError(state.served ?? '?', apiError(answer)));
  }
  const { record, owner } = answer.body;
  say('confirm',
    h('p', {}, `Delete `, h('code', {}, id), ` “${record.title}” from domain ${owner}? This cannot be undone.`),
    h('p', { class: 'muted' }, `确认从档案域 ${owner} 删除该档案？此操作无法撤销。`),
    h('div', { class: 'row' },
      h('button', { type: 'button', class: 'danger', id: 'confirm-delete', onclick: () => deleteAt(id, owner) }, '确认删除 Delete'),
      h('button', { type: 'button', class: 'secondary', onclick: () => show(out, ) }, '取消 Cancel')));
}

async function deleteAt(id, owner) {
  const out = $('delete-result');
  const say = (cls, ...text) => show(out, h('div', { class: `card ${cls}`, role: cls === 'error' ? 'alert' : null }, ...text));
  const address = addressOf(owner);
  if (!address) return say('error', `Domain ${owner} is no longer in the cluster view. Nothing was deleted.`);
  say('pending', `Deleting ${id} from domain ${owner}… 删除中…`);
  let answer;
  try {
    answer = await callApi(address, `/v1/archives/${encodeIdSegment(id)}`, { method: 'DELETE' });
  } catch {
    return say('error', `${plainApiError(owner, null)} Nothing was deleted.`);
  }
  if (answer.status === 204) {
    say('success', `Deleted ${id} from domain ${owner}. 已从档案域 ${owner} 删除。`);
    $('delete-form').reset();
    await refreshDomain(owner);
    return;
  }
  if (answer.status === 404) return say('absent', `Domain ${owner} no longer holds ${id}: it was already deleted. 档案已被删除。`);
  say('error', plainApiError(owner, apiError(answer)));
}

// ---------------------------------------------------------------- start

function busy(button, work) {
  return async (...args) => {
    button.disabled = true;
    try {
      await work(...args);
    } catch (e) {
      console.error(e);
    } finally {
      button.disabled = false;
    }
  };
}

function start() {
  const tokenForm = $('token-form');
  if (sessionStorage.getItem(TOKEN_KEY)) tokenForm.hidden = false;
  tokenForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const token = $('token').value.trim();
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    else sessionStorage.removeItem(TOKEN_KEY);
    $('token').value = '';
    $('token-note').textContent = token ? 'Token set for this tab. 令牌已设置。' : 'Token cleared. 令牌已清除。';
    refreshAll();
  });
  const searchForm = $('search-form');
  searchForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    busy($('search-button'), () => search($('search-id').value))();
  });
  const addForm = $('add-form');
  addForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    busy($('add-button'), () => addRecord(addForm))();
  });
  const deleteForm = $('delete-form');
  deleteForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    busy($('delete-button'), () => findForDelete($('delete-id').value))();
  });

  let timer = null;
  const schedule = () => {
    clearInterval(timer);
    timer = setInterval(() => {
      if (document.visibilityState === 'visible') refreshAll();
    }, REFRESH_MS);
  };
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible') refreshAll();
  });
  setInterval(renderCluster, 1000); // "synced N s ago"

  const fromHash = new URLSearchParams(location.hash.slice(1)).get('search');
  refreshAll().then(() => {
    document.body.dataset.ready = 'true';
    if (fromHash) {
      $('search-id').value = fromHash;
      search(fromHash, { pushHash: false });
    }
  });
  schedule();
}

start();
