// Finding a person's records by a key (an identity number, say) in every domain: the form, the request and the answer grouped by archive.
//
// The search goes to the serving domain as a POST (the value stays out of
// URLs, history and access logs); that domain asks every other. Searches
// need a token with the `search` role. The value is never put in the
// page's address, and the page never asks for a private key's filter.

import { formatMs, plainApiError } from './util.js';
import { $, h, show } from './dom.js';
import { apiError, callApi } from './api.js';

/** How each key type is named on the form. */
const KEY_LABELS = {
  id_card: '居民身份证号 Resident identity number',
  name_birth: '姓名|出生日期 Name|date of birth (张三|1990-03-07)',
};

/** Fills the key type list from the serving domain (/v1/keys). */
export async function loadKeyTypes() {
  const select = $('person-key-type');
  let answer;
  try {
    answer = await callApi('', '/v1/keys');
  } catch {
    return;
  }
  if (answer.status !== 200) return;
  const types = answer.body?.key_types ?? [];
  show(
    select,
    types.map((t) => h('option', { value: t.name }, KEY_LABELS[t.name] ?? t.name)),
  );
  $('person-panel').hidden = types.length === 0;
}

/** What a search for a person answered, grouped by archive (domain). */
function renderRecords(records) {
  const byDomain = new Map();
  for (const r of records) {
    if (!byDomain.has(r.domain)) byDomain.set(r.domain, []);
    byDomain.get(r.domain).push(r);
  }
  return [...byDomain.entries()].map(([domain, list]) =>
    h(
      'div',
      { class: 'person-domain', 'data-domain': domain },
      h('h3', {}, `档案域 ${domain} · Domain ${domain} (${list.length})`),
      h(
        'ul',
        {},
        list.map((r) => h('li', {}, h('code', {}, r.id), ' ', r.title)),
      ),
    ),
  );
}

/** Searches every domain for the records with the form's key. */
export async function searchPerson() {
  const out = $('person-result');
  const keyType = $('person-key-type').value;
  const value = $('person-value').value;
  if (!value.trim()) {
    show(out, h('p', { class: 'card error' }, 'Enter a value to search for. 请输入要查询的内容。'));
    return;
  }
  out.dataset.state = 'searching';
  show(out, h('p', { class: 'muted' }, 'Searching every domain… 正在检索所有档案域…'));
  let answer;
  try {
    answer = await callApi('', '/v1/search', { method: 'POST', body: { key_type: keyType, value } });
  } catch (e) {
    out.dataset.state = 'error';
    show(out, h('p', { class: 'card error' }, plainApiError('serving this page', e))); // i18n: a domain's name in plainApiError's bilingual sentence
    return;
  }
  const body = answer.body ?? {};
  if (answer.status === 200 || answer.status === 503) {
    const records = body.records ?? [];
    const domains = new Set(records.map((r) => r.domain)).size;
    const asked = (body.asked ?? []).length;
    const summary = `${records.length} records in ${domains} domains; ${asked} domains asked, ${formatMs(answer.ms)}. ` +
      `共 ${records.length} 条记录，分布于 ${domains} 个档案域；询问了 ${asked} 个档案域，耗时 ${formatMs(answer.ms)}。`;
    const missing = body.unreachable ?? [];
    out.dataset.state = answer.status === 200 ? 'found' : 'partial';
    show(
      out,
      answer.status === 503
        ? h(
            'p',
            { class: 'card warning' },
            missing.length
              ? `Incomplete: domains ${missing.join(', ')} could not be asked and may hold more records. 部分档案域无法连接，结果可能不完整。`
              : `Incomplete: ${body.message ?? 'the list of domains could not be confirmed'}. 结果可能不完整。`,
          )
        : null,
      records.length === 0 && answer.status === 200
        ? h('p', {}, 'No domain holds a record with this key. 所有档案域均无此记录。')
        : renderRecords(records),
      h('p', { class: 'muted small' }, summary),
    );
    return;
  }
  out.dataset.state = 'error';
  const err = apiError(answer);
  const text =
    err.code === 'forbidden'
      ? 'Searching by key needs a token with the search role: enter one at the top of the page. 按证件检索需要具有检索权限的令牌。'
      : err.code === 'invalid_key'
        ? `${err.message}. 输入的内容无效。`
        : plainApiError('serving this page', err);
  show(out, h('p', { class: 'card error' }, text));
}
