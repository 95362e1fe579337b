// Searching for an archive number: answered by this browser when its filters can say "in no domain", otherwise asked of the serving domain.
//
// A search first brings the filters held here up to date (small delta
// requests, at most the page's budget of them: only the filters within it
// are held), then asks them (`localAnswer`). Only a certain "no" from every
// domain is answered here; anything else, and every search while some
// domain's filter is beyond the budget, is a lookup at the serving domain
// (/v1/lookup), shown with its route and timing, or as the record found.

import {
  METADATA_LABELS,
  checkId,
  describeRoute,
  encodeIdSegment,
  formatAgo,
  formatBytes,
  formatMs,
  idForms,
  metadataValue,
  plainApiError,
} from './util.js';
import { $, h, show } from './dom.js';
import { apiError, callApi } from './api.js';
import { FRESH_MS, addressOf, holds, refreshFilter, state } from './cluster.js';
import { budgetReason } from './budget.js';

/** A filter copy synced longer ago than this is not trusted for a "not here". */
const LOCAL_FRESH_MS = 5000;
/** How long a search waits for the filters to be brought up to date. */
const SEARCH_SYNC_MS = 1500;

// ---------------------------------------------------------------- filters

/**
 * Before a search: every copy held synced in the last moment, so that a
 * record written anywhere before the search is seen. Small delta requests
 * (one per filter held, so at most the budget's), never a lookup. Nothing
 * while some domain's filter is not held: the browser cannot answer by
 * itself then, and the search is asked of the serving domain anyway (the
 * copies held still name the domains that may hold it, as of the last
 * refresh, a few seconds ago at most).
 */
async function freshen() {
  const started = performance.now();
  if (!state.choice.everything) return { ms: 0, synced: 0 };
  const stale = [...state.domains.values()]
    .filter((d) => holds(d.name))
    .filter((d) => !d.filter || d.filterError || Date.now() - d.syncedAt > 300);
  await Promise.all(stale.map((d) => refreshFilter(d, SEARCH_SYNC_MS)));
  return { ms: performance.now() - started, synced: stale.length };
}

// ---------------------------------------------------------------- the ID profile

/** The cluster's ID profile (/v1/keys' `id_profile`), once read. */
let idProfile = null;

/** How typed archive numbers are read here, as the domains read them. */
async function readProfile() {
  if (idProfile) return idProfile;
  try {
    const answer = await callApi('', '/v1/keys');
    if (answer.status === 200 && answer.body?.id_profile) idProfile = answer.body.id_profile;
  } catch {
    // The default until the domain answers: what it reads when not told otherwise.
  }
  return idProfile ?? { separator: '\u00b7' };
}

// ---------------------------------------------------------------- local answer

/**
 * What the filters held here say about the forms of an archive number
 * (`ids`: the normalised one and the one typed): 'absent' only when the
 * cluster view is fresh and every domain's filter is held, loaded, fresh
 * and says no to every form. Otherwise 'ask', with the reasons (the budget
 * named for the domains whose filters it leaves out).
 */
function localAnswer(ids) {
  const started = performance.now();
  const domains = [...state.domains.values()];
  const reasons = [];
  const maybe = [];
  if (state.clusterError || Date.now() - state.clusterAt > FRESH_MS) {
    reasons.push('the list of domains is not up to date (档案域名单不是最新的)');
  }
  if (!state.membershipConfirmed) {
    reasons.push(`domain ${state.served ?? ''} cannot confirm the list of domains with its coordinator (档案域 ${state.served ?? ''} 无法向协调服务确认档案域名单)`);
  }
  if (domains.length === 0) reasons.push('no domain is known yet (尚不知道任何档案域)');
  // Beyond the budget: no "no" from those domains here, so no local
  // answer at all; the held copies only name the domains that may hold it.
  const notHeld = domains.filter((d) => !holds(d.name));
  const partial = notHeld.length > 0;
  if (partial) {
    reasons.push(budgetReason(state.choice, state.budget) ?? `the filters of ${notHeld.length} domains are not held in this browser (浏览器未保存 ${notHeld.length} 个档案域的过滤器)`);
  }
  for (const d of domains) {
    if (!holds(d.name)) continue;
    if (!d.filter) {
      if (!partial) reasons.push(d.filterError || `domain ${d.name}'s filter is still loading (档案域 ${d.name} 的过滤器仍在加载)`);
      continue;
    }
    if (partial) {
      // Not brought up to date for this search (freshen): no reason to give.
    } else if (d.filterError) {
      reasons.push(d.filterError);
    } else if (Date.now() - d.syncedAt > LOCAL_FRESH_MS) {
      reasons.push(`domain ${d.name}'s filter in this browser was last brought up to date ${formatAgo(Date.now() - d.syncedAt)} (浏览器中档案域 ${d.name} 的过滤器不是最新的)`);
    }
    if (ids.some((id) => d.filter.mightContain(id))) maybe.push(d.name);
  }
  const ms = performance.now() - started;
  if (reasons.length === 0 && maybe.length === 0) {
    return { verdict: 'absent', ms, count: domains.length };
  }
  return { verdict: 'ask', ms, reasons, maybe };
}

// ---------------------------------------------------------------- search

/** Numbers the searches: an answer to an older one than the last is dropped. */
let searchSeq = 0;

/**
 * Searches every domain for the archive number typed as `raw`, and shows
 * the answer in #result (and the number in the address, unless `pushHash`
 * is false).
 */
export async function search(raw, { pushHash = true } = {}) {
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
  const profile = await readProfile();
  if (seq !== searchSeq) return;
  const local = localAnswer(idForms(id, profile));
  if (local.verdict === 'absent') {
    const synced = sync.synced > 0
      ? ` Its copies were brought up to date first (${sync.synced} small delta request${sync.synced > 1 ? 's' : ''}, ${formatMs(sync.ms)}). 过滤器已先行更新（${sync.synced} 次增量请求，${formatMs(sync.ms)}）。`
      : '';
    show(out, h('div', { class: 'card absent', 'data-answer': 'browser-absent' },
      h('h3', {}, '不在任何档案域 ', h('span', {}, 'Not in any domain')),
      h('p', { class: 'id-line' }, h('code', {}, id)),
      h('p', {}, `Answered by this browser in ${formatMs(local.ms)}: the filters of all ${local.count} domains say that none of them holds this archive number. No server was asked to look it up.`),
      h('p', { class: 'muted' }, `由浏览器直接答复：${local.count} 个档案域的过滤器均表明不持有该档案号，未向服务器查询。`),
      h('p', { class: 'muted tiny' }, `A filter never misses a record it holds, so "no" from every domain's filter is certain. 过滤器不会漏报已有档案，因此所有过滤器均答“无”即可确定。${synced}`),
      h('p', {}, h('button', {
        type: 'button',
        class: 'link',
        onclick: () => askServer(id, ++searchSeq, performance.now(), { forced: true }),
      }, 'Ask the servers anyway 仍然询问服务器'))));
    return;
  }
  await askServer(id, seq, started, { local });
}

/** Asks the serving domain to look `id` up (/v1/lookup) and shows its answer. */
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
    ? `The filters held in this browser said domain${local.maybe.length > 1 ? 's' : ''} ${local.maybe.join(', ')} may hold it. 浏览器中的过滤器表明档案域 ${local.maybe.join('、')} 可能持有该档案。`
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
      suggestionList(body.suggestions),
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

/** "Did you mean": the nearest archive numbers the serving domain holds, each a search. */
function suggestionList(suggestions) {
  if (!Array.isArray(suggestions) || suggestions.length === 0) return null;
  return h('div', { class: 'suggestions', 'data-answer': 'suggestions' },
    h('p', {}, `Did you mean one of the archive numbers domain ${state.served ?? ''} holds? 您要找的是否是：`),
    h('ul', {}, suggestions.map((s) => h('li', {}, h('button', {
      type: 'button',
      class: 'link',
      onclick: () => {
        $('search-id').value = s;
        search(s);
      },
    }, s)))));
}

// ---------------------------------------------------------------- the record found

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
