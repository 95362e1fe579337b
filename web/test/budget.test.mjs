// The page's choice of the filters it holds within its budget (web/budget.js): what fits, smallest first, never more, and the reasons and lines it shows.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  DEFAULT_BUDGET,
  budgetReason,
  budgetSummary,
  chooseFilters,
  filterSize,
  readBudget,
} from '../budget.js';

const budget = (filterBytes, filterRequests) => ({ filterBytes, filterRequests });
const domains = (sizes) => Object.entries(sizes).map(([name, bytes]) => ({ name, bytes }));

test('a small cluster whose filters all fit is held whole, as a page without a budget would', () => {
  const choice = chooseFilters(domains({ A: 2560, B: 2560, C: 2560 }), DEFAULT_BUDGET);
  assert.deepEqual(choice.held, ['A', 'B', 'C']);
  assert.equal(choice.everything, true);
  assert.equal(choice.bytes, 7680);
  assert.deepEqual(choice.left, []);
  assert.equal(budgetReason(choice, DEFAULT_BUDGET), null);
  assert.equal(budgetSummary(choice, DEFAULT_BUDGET, 'A', 3), '');
});

test('beyond the bytes, the smallest filters are held and the largest left to the server', () => {
  const choice = chooseFilters(domains({ big: 9000, A: 3000, B: 1000, C: 2000 }), budget(6000, 24));
  assert.deepEqual(choice.held, ['B', 'C', 'A']);
  assert.equal(choice.bytes, 6000);
  assert.deepEqual(choice.left, ['big']);
  assert.equal(choice.wanted, 15000);
  assert.equal(choice.everything, false);
});

test('beyond the requests, no more filters are held than a search may bring up to date', () => {
  const choice = chooseFilters(domains({ A: 10, B: 10, C: 10, D: 5 }), budget(1e9, 2));
  assert.deepEqual(choice.held, ['D', 'A']);
  assert.deepEqual(choice.left, ['B', 'C']);
});

test('a domain whose filter size is not known yet is not held, and a zero budget holds nothing', () => {
  const choice = chooseFilters([{ name: 'A', bytes: 10 }, { name: 'B', bytes: null }, { name: 'C' }], budget(100, 24));
  assert.deepEqual(choice.held, ['A']);
  assert.deepEqual(choice.unknown, ['B', 'C']);
  assert.equal(choice.everything, false);
  const none = chooseFilters(domains({ A: 0, B: 10 }), budget(0, 0));
  assert.deepEqual(none.held, []);
  assert.match(budgetReason(none, budget(0, 0)), /budget holds no filters/);
  assert.match(budgetSummary(none, budget(0, 0), 'A', 2), /every search is asked of domain A.*本页不在浏览器中保存过滤器/);
});

test('the reason a search was asked of the server names the budget and the domains left out', () => {
  const b = budget(6000, 2);
  const one = chooseFilters(domains({ A: 2560, B: 2560, C: 2560 }), b);
  assert.deepEqual(one.held, ['A', 'B']);
  assert.equal(
    budgetReason(one, b),
    "domain C's filter is not held in this browser: the filters of all 3 domains (7.5 KB) do not fit in this page's budget of 5.9 KB and 2 filter requests a search (超出本页的过滤器预算)",
  );
  const many = chooseFilters(
    Array.from({ length: 100 }, (_, i) => ({ name: `D${String(i).padStart(3, '0')}`, bytes: 3_600_000 + i })),
    DEFAULT_BUDGET,
  );
  assert.equal(many.held.length, 5);
  const reason = budgetReason(many, DEFAULT_BUDGET);
  assert.match(reason, /^the filters of domains D005, D006, D007 and 92 more are not held in this browser: the filters of all 100 domains \(343\.\d\d MB\) do not fit in this page's budget of 20\.00 MB and 24 filter requests a search/);
  const two = chooseFilters(domains({ A: 1, B: 5, C: 5 }), budget(1, 24));
  assert.match(budgetReason(two, budget(1, 24)), /^the filters of domains B and C are not held/);
  const unknown = chooseFilters([{ name: 'A', bytes: 5 }, { name: 'B', bytes: 50 }, { name: 'C', bytes: null }], budget(10, 24));
  assert.equal(
    budgetReason(unknown, budget(10, 24)),
    "domain B's filter is not held in this browser: the 2 filters of known size (55 B) do not fit in this page's budget of 10 B and 24 filter requests a search (超出本页的过滤器预算); " +
      "the size of domain C's filter is not known yet, so it is not held (过滤器大小未知)",
  );
});

test('the line under the table says how many filters are held and who is asked about the others, in English and Chinese', () => {
  const b = budget(6000, 2);
  const choice = chooseFilters(domains({ A: 2560, B: 2560, C: 2560 }), b);
  assert.equal(
    budgetSummary(choice, b, 'A', 3),
    "This page's budget (5.9 KB and 2 filter requests a search) holds the filters of 2 of 3 domains (5.0 KB); searches ask domain A about the other 1. " +
      '浏览器按预算保存 2 个档案域的过滤器，其余 1 个档案域由档案域 A 检索。',
  );
});

test('the budget is read from /v1/cluster, the defaults standing in for an answer without one', () => {
  assert.deepEqual(readBudget({ filter_bytes: 6000, filter_requests: 2 }), budget(6000, 2));
  assert.deepEqual(readBudget({ filter_bytes: 0, filter_requests: 0 }), budget(0, 0));
  assert.deepEqual(readBudget(undefined), DEFAULT_BUDGET);
  assert.deepEqual(readBudget({ filter_bytes: '6000', filter_requests: 2 }), DEFAULT_BUDGET);
  assert.deepEqual(readBudget({ filter_bytes: -1, filter_requests: 2 }), DEFAULT_BUDGET);
  assert.deepEqual(readBudget({ filter_bytes: 1.5, filter_requests: 2 }), DEFAULT_BUDGET);
  assert.deepEqual(DEFAULT_BUDGET, budget(20 * 1024 * 1024, 24));
});

test('a filter is weighed by what the serving domain says, else the copy held, else the domain\'s own figures', () => {
  assert.equal(filterSize({ info: { filter_bytes: 2560 }, filter: { byteLength: 1 } }), 2560);
  assert.equal(filterSize({ info: {}, filter: { byteLength: 1280 } }), 1280);
  // A counting filter is published as one bit per counter.
  assert.equal(filterSize({ info: {}, stats: { filter: { kind: 'counting', cells: 20480, bytes: 10240 } } }), 2560);
  assert.equal(filterSize({ info: {}, stats: { filter: { kind: 'cuckoo', cells: 4096, bytes: 6144 } } }), 6144);
  assert.equal(filterSize({ info: null, filter: null, stats: null }), null);
  assert.equal(filterSize({ info: { filter_bytes: null } }), null);
});

// ---------------------------------------------------------------- properties

/** A small deterministic generator (mulberry32), so that a failure can be replayed from its seed. */
function generator(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

/** Random domains: sizes spread over four orders of magnitude, ties frequent, a few unknown. */
function randomCase(random, maxDomains) {
  const n = Math.floor(random() * (maxDomains + 1));
  const list = [];
  for (let i = 0; i < n; i++) {
    const r = random();
    const bytes = r < 0.08 ? null : r < 0.2 ? 512 * Math.floor(random() * 4) : Math.floor(10 ** (2 + 4 * random()));
    list.push({ name: `D${i}`, bytes });
  }
  const total = list.reduce((s, d) => s + (d.bytes ?? 0), 0);
  const b = budget(Math.floor(random() * (total + 1000)), Math.floor(random() * (n + 2)));
  return { list, b };
}

/** The most filters any subset of `known` holds within `b`: every subset tried. */
function mostThatFit(known, b) {
  let best = 0;
  for (let mask = 0; mask < 1 << known.length; mask++) {
    let count = 0;
    let bytes = 0;
    for (let i = 0; i < known.length; i++) {
      if (mask & (1 << i)) {
        count++;
        bytes += known[i].bytes;
      }
    }
    if (count <= b.filterRequests && bytes <= b.filterBytes) best = Math.max(best, count);
  }
  return best;
}

test('for random sizes the filters held never exceed the budget, and no filter left out would fit beside them', () => {
  for (let seed = 1; seed <= 2000; seed++) {
    const random = generator(seed);
    const { list, b } = randomCase(random, 60);
    const choice = chooseFilters(list, b);
    const size = new Map(list.map((d) => [d.name, d.bytes]));
    const at = `seed ${seed}`;
    const held = choice.held.reduce((s, n) => s + size.get(n), 0);
    assert.equal(held, choice.bytes, at);
    assert.ok(choice.bytes <= b.filterBytes, `${at}: ${choice.bytes} bytes held, budget ${b.filterBytes}`);
    assert.ok(choice.held.length <= b.filterRequests, `${at}: ${choice.held.length} held, ${b.filterRequests} requests`);
    // Every domain is held, left out or of unknown size, once.
    assert.deepEqual([...choice.held, ...choice.left, ...choice.unknown].sort(), list.map((d) => d.name).sort(), at);
    assert.deepEqual(choice.unknown.sort(), list.filter((d) => d.bytes === null).map((d) => d.name).sort(), at);
    // Maximal: adding any filter left out would break a limit.
    for (const name of choice.left) {
      assert.ok(choice.held.length + 1 > b.filterRequests || choice.bytes + size.get(name) > b.filterBytes, `${at}: ${name} would fit`);
    }
    // Greedy, smallest first: none held is larger than one left out.
    const largestHeld = Math.max(-1, ...choice.held.map((n) => size.get(n)));
    const smallestLeft = Math.min(Infinity, ...choice.left.map((n) => size.get(n)));
    assert.ok(largestHeld <= smallestLeft, `${at}: held ${largestHeld} B, left ${smallestLeft} B`);
    // The whole cluster is held exactly when it fits whole.
    const fitsWhole = choice.unknown.length === 0 && list.length <= b.filterRequests &&
      list.reduce((s, d) => s + d.bytes, 0) <= b.filterBytes;
    assert.equal(choice.everything, fitsWhole, at);
    // The same choice whatever order the domains come in.
    const shuffled = [...list].sort(() => random() - 0.5);
    assert.deepEqual(chooseFilters(shuffled, b), choice, `${at}: order mattered`);
  }
});

test('for random sizes no other choice within the budget holds more domains than smallest first', () => {
  for (let seed = 1; seed <= 400; seed++) {
    const random = generator(seed * 7919);
    const { list, b } = randomCase(random, 12);
    const choice = chooseFilters(list, b);
    const known = list.filter((d) => d.bytes !== null);
    assert.equal(choice.held.length, mostThatFit(known, b), `seed ${seed * 7919}: ${JSON.stringify({ list, b })}`);
  }
});
