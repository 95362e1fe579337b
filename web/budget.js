// Which domains' filters this browser holds, chosen within the budget the serving domain gives its page ([page] of its configuration).
//
// A province's hundred domains publish some 360 MB of filters and a
// nation's 3 301 about 2 GB: no browser can hold them all, nor bring them
// all up to date before every search. The serving domain tells the page
// its budget in /v1/cluster (`page`: bytes of filters held, and filter
// requests a search may make, so also the most filters held) and how large
// each domain's filter is (`filter_bytes`), before the page fetches any.
// Pure: no DOM, no requests. cluster.js applies the choice, search.js
// gives its reason; web/test/budget.test.mjs tests it.

import { formatBytes, formatCount } from './util.js';

/** The serving domain's defaults ([page] in the README), for an answer without `page`. */
export const DEFAULT_BUDGET = Object.freeze({ filterBytes: 20 * 1024 * 1024, filterRequests: 24 });

const whole = (n) => Number.isSafeInteger(n) && n >= 0;

/**
 * The budget from /v1/cluster's `page` (`{filter_bytes, filter_requests}`),
 * or the defaults when it is absent or not two whole numbers.
 */
export function readBudget(page) {
  if (page && whole(page.filter_bytes) && whole(page.filter_requests)) {
    return { filterBytes: page.filter_bytes, filterRequests: page.filter_requests };
  }
  return DEFAULT_BUDGET;
}

/**
 * The size of a domain's filter as this browser holds it (its bits, or a
 * cuckoo filter's table): what the serving domain says (`info.filter_bytes`
 * from /v1/cluster), else the copy held here, else the domain's own figures
 * (/v1/stats: a counting filter is published as one bit per counter, a
 * cuckoo filter as its table of `bytes`). Null when none of them is known.
 */
export function filterSize({ info, filter, stats }) {
  if (whole(info?.filter_bytes)) return info.filter_bytes;
  if (filter && whole(filter.byteLength)) return filter.byteLength;
  const figures = stats?.filter;
  if (figures?.kind === 'counting' && whole(figures.cells)) return Math.floor(figures.cells / 8);
  if (figures?.kind === 'cuckoo' && whole(figures.bytes)) return figures.bytes;
  return null;
}

const byName = (a, b) => (a < b ? -1 : a > b ? 1 : 0);

/**
 * Which filters to hold: `domains` is `[{ name, bytes }]` (`bytes` null
 * when the size is not known), `budget` is `{ filterBytes, filterRequests }`.
 *
 * Smallest first, as many as fit in both limits. The page answers "in no
 * domain" by itself only when it holds every domain's filter; when all fit,
 * all are held, whatever the order, and nothing changes from a page without
 * a budget. When they do not, the filters held still say which of their
 * domains may hold an ID (shown beside the server's answer), one domain each,
 * for one request each to keep current whatever their size: taking the
 * smallest first holds the most domains the bytes allow (no other choice
 * holds more: the k smallest are the least bytes any k can take), and as a
 * cluster grows it is the largest filters, the costliest to fetch on a
 * phone, that stop being held. Ties go by name, so the choice is the same
 * on every refresh and in every browser. A domain whose size is not known
 * yet is not held: it could not be weighed.
 *
 * Returns `{ held, bytes, left, unknown, wanted, everything }`: the names
 * held in the order chosen and their bytes in all; the names of known size
 * not held (smallest first); those of unknown size (by name); the bytes of
 * every filter of known size; whether every domain is held.
 */
export function chooseFilters(domains, budget) {
  const known = domains.filter((d) => whole(d.bytes)).sort((a, b) => a.bytes - b.bytes || byName(a.name, b.name));
  const unknown = domains.filter((d) => !whole(d.bytes)).map((d) => d.name).sort(byName);
  const held = [];
  let bytes = 0;
  for (const d of known) {
    // Sorted: once one does not fit, no later one (as large or larger) does.
    if (held.length >= budget.filterRequests || bytes + d.bytes > budget.filterBytes) break;
    held.push(d.name);
    bytes += d.bytes;
  }
  const left = known.slice(held.length).map((d) => d.name);
  const wanted = known.reduce((n, d) => n + d.bytes, 0);
  return { held, bytes, left, unknown, wanted, everything: held.length === domains.length };
}

/** "domain C's filter is", "the filters of domains C, D, E and 97 more are". */
function whose(names) {
  if (names.length === 1) return `domain ${names[0]}'s filter is`; // i18n: part of a sentence translated where it is used
  const shown = names.slice(0, 3);
  const more = names.length - shown.length;
  const list = more > 0 ? `${shown.join(', ')} and ${formatCount(more)} more` : `${shown.slice(0, -1).join(', ')} and ${shown.at(-1)}`;
  return `the filters of domains ${list} are`; // i18n: part of a sentence translated where it is used
}

/** The budget in words: "5.9 KB and 2 filter requests a search". */
export function describeBudget(budget) {
  const r = budget.filterRequests;
  return `${formatBytes(budget.filterBytes)} and ${formatCount(r)} filter request${r === 1 ? '' : 's'} a search`; // i18n: part of a sentence translated where it is used
}

/**
 * Why the browser cannot answer "in no domain" by itself for the domains
 * whose filters it does not hold (null when it holds every one): the
 * budget, named, with the sizes that do not fit in it. English, then Chinese.
 */
export function budgetReason(choice, budget) {
  const parts = [];
  if (choice.left.length > 0) {
    const none = budget.filterBytes === 0 || budget.filterRequests === 0;
    const known = choice.held.length + choice.left.length;
    const filters = choice.unknown.length === 0
      ? `the filters of all ${formatCount(known)} domains (${formatBytes(choice.wanted)})` // i18n: part of a sentence translated where it is used
      : `the ${formatCount(known)} filters of known size (${formatBytes(choice.wanted)})`; // i18n: part of a sentence translated where it is used
    parts.push(none
      ? `${whose(choice.left)} not held in this browser: this page's budget holds no filters (本页不在浏览器中保存过滤器)`
      : `${whose(choice.left)} not held in this browser: ${filters} do not fit in this page's budget of ${describeBudget(budget)} (超出本页的过滤器预算)`);
  }
  if (choice.unknown.length > 0) {
    const [first, ...rest] = choice.unknown;
    parts.push(rest.length === 0
      ? `the size of domain ${first}'s filter is not known yet, so it is not held (过滤器大小未知)`
      : `the sizes of ${formatCount(choice.unknown.length)} domains' filters are not known yet, so they are not held (过滤器大小未知)`);
  }
  return parts.length > 0 ? parts.join('; ') : null;
}

/**
 * The line under the table of domains when not every filter is held: how
 * many are, within which budget, and that the others are asked of the
 * serving domain. Empty when every filter is held. English, then Chinese.
 */
export function budgetSummary(choice, budget, served, total) {
  if (choice.everything) return '';
  const held = choice.held.length;
  const others = total - held;
  const who = served ?? 'serving this page'; // i18n: a domain's name in the bilingual sentences below
  if (held === 0 && (budget.filterBytes === 0 || budget.filterRequests === 0)) {
    return `This page's budget holds no filters in the browser: every search is asked of domain ${who}. ` +
      `本页不在浏览器中保存过滤器，每次检索均由档案域 ${who} 查询。`;
  }
  return `This page's budget (${describeBudget(budget)}) holds the filters of ${formatCount(held)} of ${formatCount(total)} domains (${formatBytes(choice.bytes)}); ` + // i18n: translated below
    `searches ask domain ${who} about the other ${formatCount(others)}. ` +
    `浏览器按预算保存 ${formatCount(held)} 个档案域的过滤器，其余 ${formatCount(others)} 个档案域由档案域 ${who} 检索。`;
}
