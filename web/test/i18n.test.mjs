// Every string the page can show is in both languages: a check of the page's sources that fails on an English-only one.
//
// How a string a person may read is written (README: "both languages
// everywhere a person reads"): in one literal, English and Chinese
// together, as 'not held 未保存' or `${n} records 条记录`; or, for a heading
// and its translation, the Chinese in a literal on the same line or the
// line next to it — never further, where a branch could show one without
// the other. A CSS class (`class: 'pill up'`) is known as code. Any other
// English literal ends its line with `// i18n: WHY`, saying why it needs no
// Chinese: `// i18n: code` (a selector, a key no person reads), or
// `// i18n: translated above` (a paragraph whose translation is the
// element before it, too long for one line). Text that comes from outside the page (a record's title, a domain's
// name, the detail of a server's error after a bilingual sentence) is not
// in the page's sources and is not checked here.
//
// The check reads every module of the page (web/*.js) with a small
// tokenizer (comments, strings, template literals and their `${…}`
// expressions, regular expressions), and flags a literal that has two
// English words in a row and no Chinese character. xarchive-filter.js, the
// filter reader the page shares with Node.js, is left out: its errors are
// shown only as the detail after a bilingual sentence (cluster.js); so is
// seal.js, the certificate verifier, whose reasons the page names in both
// languages by their code and shows the English detail after.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const WEB = fileURLToPath(new URL('..', import.meta.url));
const SHARED = new Set(['xarchive-filter.js', 'seal.js']);
const MARKER = /\/\/ i18n: \S.*$/;
/** How many lines away a translation may stand. */
const NEAR = 1;

/** Two English words in a row (letters, a space between). */
const ENGLISH = /[A-Za-z]{2,}[,.;:!?)'’"]*\s+[("'‘“]*[A-Za-z]{2,}/;
/** A Chinese character. */
const CHINESE = /[\u3400-\u9fff\uf900-\ufaff]/;

/**
 * The string and template literals of `source`, each with its line and
 * its text (a template's `${…}` as "…"), comments and regular
 * expressions skipped.
 */
export function literals(source) {
  const found = [];
  let i = 0;
  let line = 1;
  // What the last significant token was, to tell a regular expression
  // from a division.
  let last = '';

  function advance() {
    if (source[i] === '\n') line += 1;
    i += 1;
  }

  function quoted(quote) {
    const start = line;
    const before = prefix();
    let text = '';
    advance();
    while (i < source.length && source[i] !== quote) {
      if (source[i] === '\\') {
        text += source[i + 1] ?? '';
        advance();
        advance();
        continue;
      }
      text += source[i];
      advance();
    }
    advance();
    found.push({ line: start, text, before });
  }

  function template() {
    const start = line;
    const before = prefix();
    let text = '';
    advance();
    while (i < source.length && source[i] !== '`') {
      if (source[i] === '\\') {
        text += source[i + 1] ?? '';
        advance();
        advance();
      } else if (source[i] === '$' && source[i + 1] === '{') {
        advance();
        advance();
        code('}');
        advance();
        text += '…';
      } else {
        text += source[i];
        advance();
      }
    }
    advance();
    found.push({ line: start, text, before });
  }

  /** The code before the literal on its line. */
  function prefix() {
    return source.slice(source.lastIndexOf('\n', i - 1) + 1, i);
  }

  function regex() {
    advance();
    let inClass = false;
    while (i < source.length && source[i] !== '\n') {
      const c = source[i];
      if (c === '\\') {
        advance();
      } else if (c === '[') {
        inClass = true;
      } else if (c === ']') {
        inClass = false;
      } else if (c === '/' && !inClass) {
        break;
      }
      advance();
    }
    advance();
    while (/[a-z]/.test(source[i] ?? '')) advance();
  }

  /** Code until an unmatched `close` (or the end). */
  function code(close) {
    let depth = 0;
    while (i < source.length) {
      const c = source[i];
      const next = source[i + 1];
      if (c === '/' && next === '/') {
        while (i < source.length && source[i] !== '\n') advance();
      } else if (c === '/' && next === '*') {
        while (i < source.length && !(source[i] === '*' && source[i + 1] === '/')) advance();
        advance();
        advance();
      } else if (c === "'" || c === '"') {
        quoted(c);
        last = 'x';
      } else if (c === '`') {
        template();
        last = 'x';
      } else if (c === '/' && (last === '' || /[(,=:[!&|?{};+\-*%<>~^]/.test(last) || /\b(return|typeof|case|of|in)$/.test(lastWord()))) {
        regex();
        last = 'x';
      } else if (c === '{') {
        depth += 1;
        last = c;
        advance();
      } else if (c === '}') {
        if (depth === 0 && close === '}') return;
        depth -= 1;
        last = c;
        advance();
      } else {
        if (!/\s/.test(c)) last = c;
        advance();
      }
    }
  }

  function lastWord() {
    const before = source.slice(Math.max(0, i - 12), i).trimEnd();
    return before.match(/[A-Za-z]+$/)?.[0] ?? '';
  }

  code(null);
  return found;
}

/** A CSS class list given as a `class` property (`class: 'pill up'`, `class: x ? 'a b' : 'c'`). */
const CLASS_VALUE = /\bclass(Name)?\s*[:=][^,;{}]*$/;
const CLASS_LIST = /^[a-z0-9…-]+( [a-z0-9…-]+)*$/;

/**
 * The literals of `source` that read as English and have no Chinese, in
 * themselves or in a literal at most NEAR lines away.
 */
export function englishOnly(source) {
  const lines = source.split('\n');
  const all = literals(source);
  const chineseAt = all.filter((l) => CHINESE.test(l.text)).map((l) => l.line);
  return all.filter(({ line, text, before }) =>
    ENGLISH.test(text)
    && !CHINESE.test(text)
    && !chineseAt.some((n) => Math.abs(n - line) <= NEAR)
    && !(CLASS_VALUE.test(before) && CLASS_LIST.test(text))
    && !MARKER.test(lines[line - 1]));
}

test('the tokenizer finds strings and templates, not comments or regular expressions', () => {
  const source = [
    "// 'a comment' stays out",
    "const a = 'one two'; /* 'not this' */",
    'const b = x.replace(/[\'"]/g, "");',
    'const c = `${n} records ${"in " + d} domains`;',
  ].join('\n');
  assert.deepEqual(
    literals(source).map((l) => [l.line, l.text]),
    [
      [2, 'one two'],
      [3, ''],
      [4, 'in '],
      [4, '… records … domains'],
    ],
  );
});

test('an English-only string is flagged; one in both languages, a single word or one marked as code is not', () => {
  const flagged = englishOnly(
    [
      "show('The cluster view could not be read.');",
      '',
      "show('The cluster view could not be read. 无法读取集群视图。');",
      "h('span', { class: 'ok' }, 'current 最新');",
      "h('span', { class: 'pill up' });",
      "'#cluster tbody tr'; // i18n: code",
      "'#cluster tbody tr';",
      '',
      "h('h3', {}, 'Not certain');",
      '',
      "h('h3', {}, '暂时无法确定 ', h('span', {}, 'Not certain'));",
      "h('p', {}, 'Try again in a moment.'),",
      "h('p', {}, '请稍后再试。'),",
    ].join('\n'),
  ).map((l) => l.line);
  assert.deepEqual(flagged, [1, 7, 9]);
});

test('every string the page can show is in both languages', () => {
  const problems = [];
  for (const file of readdirSync(WEB).filter((f) => f.endsWith('.js') && !SHARED.has(f))) {
    const source = readFileSync(join(WEB, file), 'utf8');
    for (const { line, text } of englishOnly(source)) problems.push(`web/${file}:${line}: ${JSON.stringify(text)}`);
  }
  assert.deepEqual(
    problems,
    [],
    `English without Chinese (write both in one literal, or end the line with "// i18n: WHY"):\n${problems.join('\n')}`,
  );
});
