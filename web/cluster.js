// The cluster as this page knows it: the one place that holds the state of the domains, refreshes it and draws it.
//
// The page reads the cluster from the serving domain (/v1/cluster), with
// the page's budget and every filter's size; it holds the filters that fit
// the budget (budget.js chooses them), fetched from each domain at its
// address and kept current with deltas, and asks domains for their stats a
// budget's worth at a time. search.js reads them from `state` here.

import { DomainRequestError, FilterFormatError, syncFilter } from './xarchive-filter.js';
import { formatAgo, formatBytes, formatCount, formatPercent, formatRate, plainApiError } from './util.js';
import { DEFAULT_BUDGET, budgetSummary, chooseFilters, filterSize, readBudget } from './budget.js';
import { $, h } from './dom.js';
import { TIMEOUT_MS, apiError, callApi, fetchWithToken } from './api.js';

/**
 * The list of domains fetched longer ago than this is not trusted for a
 * "not here"; a filter copy synced longer ago is shown as stale.
 */
export const FRESH_MS = 15000;

/** Everything the page knows of the cluster. Only this module changes it; the others read it. */
export const state = {
  served: null,
  clusterAt: 0,
  clusterError: null,
  /** Whether the serving domain's coordinator confirms its list of domains. */
  membershipConfirmed: false,
  /** name -> { name, address, self, info, stats, statsError, statsAt, filter, filterError, syncedAt, syncing } */
  domains: new Map(),
  refreshing: false,
  /** What the serving domain lets the page hold (budget.js readBudget). */
  budget: DEFAULT_BUDGET,
  /** The filters held within it (budget.js chooseFilters), chosen again with every list of domains read. */
  choice: { held: [], bytes: 0, left: [], unknown: [], wanted: 0, everything: false },
};

/** Names whose filters this browser holds, as `state.choice.held`. */
let heldNames = new Set();

/** Whether this browser holds (or is fetching) domain `name`'s filter: it is within the budget. */
export function holds(name) {
  return heldNames.has(name);
}

/** The address of domain `name`, or null when it is not in the cluster view. */
export function addressOf(name) {
  return state.domains.get(name)?.address ?? null;
}

/** The list of domains from the serving domain (/v1/cluster). */
async function refreshCluster() {
  let answer;
  try {
    answer = await callApi('', '/v1/cluster');
  } catch (e) {
    state.clusterError = 'The domain serving this page could not be reached. 无法连接本页所在的档案域。';
    return;
  }
  if (answer.status !== 200 || !answer.body || !Array.isArray(answer.body.domains)) {
    state.clusterError = `The cluster view could not be read (HTTP ${answer.status}). 无法读取集群视图（HTTP ${answer.status}）。`;
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
      statsAt: 0,
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
  state.budget = readBudget(answer.body.page);
  choose();
}

/**
 * Chooses the filters to hold within the budget, from the sizes known now;
 * a copy no longer chosen is dropped (its memory is the budget's).
 */
function choose() {
  const domains = [...state.domains.values()];
  state.choice = chooseFilters(domains.map((d) => ({ name: d.name, bytes: filterSize(d) })), state.budget);
  heldNames = new Set(state.choice.held);
  for (const d of domains) {
    if (holds(d.name)) continue;
    d.filter = null;
    d.filterError = null;
    d.syncedAt = 0;
  }
}

/**
 * The domains to ask for their stats this refresh: those asked longest
 * ago (never, first), as many as a search may make filter requests (at
 * least one), so that a province's page does not ask a hundred domains
 * every few seconds; each is asked in turn.
 */
function statsDue(domains) {
  const n = Math.max(1, state.budget.filterRequests);
  return [...domains].sort((a, b) => a.statsAt - b.statsAt || (a.name < b.name ? -1 : 1)).slice(0, n);
}

/** One domain's stats, from the domain itself. */
async function refreshStats(d) {
  d.statsAt = Date.now();
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
 * the snapshot the first time), if it is held within the budget (else
 * nothing). One sync per domain at a time: a caller arriving during one
 * waits for it.
 */
export function refreshFilter(d, timeout = TIMEOUT_MS) {
  if (!holds(d.name)) return Promise.resolve();
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
      // Chosen out of the budget meanwhile: not kept.
      if (!holds(d.name)) return;
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

function filterProblem(name, e) {
  const what = `Domain ${name}'s filter could not be loaded`; // i18n: part of the sentences below, each translated
  const zh = `档案域 ${name} 的过滤器无法加载`;
  if (e instanceof FilterFormatError) {
    return `${what}: the bytes it sent are damaged or of an unknown kind (${e.message}) (${zh}：数据损坏或格式未知)`;
  }
  if (e instanceof DomainRequestError && e.status === 0) return `${what}: the domain could not be reached (${zh}：无法连接该档案域)`;
  if (e && e.name === 'AbortError') return `${what}: no answer in time (${zh}：未及时应答)`;
  return `${what}: ${e && e.message ? e.message : e} (${zh})`;
}

/**
 * The cluster view, then the filters held and a budget's worth of
 * domains' stats; then draws it all. One at a time.
 */
export async function refreshAll() {
  if (state.refreshing) return;
  state.refreshing = true;
  try {
    await refreshCluster();
    const domains = [...state.domains.values()];
    await Promise.all([...statsDue(domains).map(refreshStats), ...domains.map((d) => refreshFilter(d))]);
  } finally {
    state.refreshing = false;
    renderCluster();
  }
}

/** After a write at one domain: its filter and stats now, not at the next tick. */
export async function refreshDomain(name) {
  const d = state.domains.get(name);
  if (!d) return;
  await Promise.all([refreshStats(d), refreshFilter(d)]);
  renderCluster();
}

/** Draws the state: who serves the page, the banner, the table of domains and the add form's domain choices. */
export function renderCluster() {
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
    // `reachable`: it answered the serving domain's probe during the last
    // read of /v1/cluster (never an older answer).
    const up = info.up !== false && info.reachable !== false && !d.statsError;
    const kind = info.kind ?? filterStats?.kind;
    const status = h('div', {},
      up ? h('span', { class: 'pill up' }, '在线 up') : h('span', { class: 'pill down' }, '离线 down'),
      info.up !== false && info.reachable === false ? h('div', { class: 'tiny warn' }, '无应答 not answering') : null,
      kind ? h('div', { class: 'muted tiny' }, kind === 'cuckoo' ? 'cuckoo filter' : 'counting Bloom') : null);
    const selfNote = d.self ? h('div', { class: 'tiny self' }, 'serves this page 本页所在') : null;
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
    } else if (!holds(d.name)) {
      const why = state.choice.unknown.includes(d.name)
        ? 'its size is not known yet 大小未知'
        : "over the page's budget 超出预算";
      copy = h('div', { 'data-held': 'no' },
        h('span', { class: 'muted' }, 'not held 未保存'),
        h('div', { class: 'muted tiny' }, `${why} · asked of ${served ?? 'the server'} 由服务器检索`));
    } else {
      copy = h('span', { class: 'warn' }, d.filterError ? 'not loaded 未加载' : 'loading… 加载中');
    }
    const problem = d.filterError
      ? `${d.filterError}. Searches ask the servers instead. 无法加载档案域 ${d.name} 的过滤器，检索将询问服务器。`
      : d.statsError;
    return [
      h('tr', { 'data-domain': d.name, class: up ? '' : 'is-down' },
        h('th', { scope: 'row' }, h('div', { class: 'domain-name' }, d.name), h('div', { class: 'muted tiny' }, d.address), selfNote),
        // `data-label`: the column's name, shown beside the cell where a
        // narrow screen lays each domain out as a card (style.css).
        h('td', { 'data-label': '状态 Status' }, status),
        h('td', { class: 'num', 'data-label': '记录 Records' }, stats ? formatCount(stats.records) : '—'),
        h('td', { class: 'num', 'data-label': '填充率 Fill ratio' }, filterStats ? formatPercent(filterStats.fill_ratio) : '—'),
        h('td', { class: 'num', 'data-label': '估计误判率 Est. false positives' }, filterStats ? formatRate(filterStats.estimated_fpr) : '—'),
        h('td', { 'data-label': '副本滞后 Replica lag' }, lag),
        h('td', { 'data-label': '浏览器中的过滤器 Filter in this browser' }, copy)),
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
  const budget = $('cluster-budget');
  budget.textContent = domains.length === 0 ? '' : budgetSummary(state.choice, state.budget, served, domains.length);
  budget.hidden = budget.textContent === '';

  // The domain choices change only with the cluster (not every second,
  // which would close the list while someone is choosing).
  const select = $('add-domain');
  const key = domains.map((d) => `${d.name}${d.self ? '*' : ''}`).join(',');
  if (select.dataset.key !== key) {
    const chosen = select.value || served;
    select.replaceChildren(...domains.map((d) =>
      h('option', { value: d.name, selected: d.name === chosen }, `${d.name}${d.self ? ' (this page’s domain 本页所在档案域)' : ''}`)));
    select.dataset.key = key;
  }
}
