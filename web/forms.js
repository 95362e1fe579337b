// Adding and deleting records through the page: the two forms, each written to the domain that holds (or will hold) the record.
//
// Archive numbers are unique across domains, so both forms first look the
// number up at the serving domain (/v1/lookup): adding refuses a number
// held by another domain, deleting goes to the domain that holds it.

import { checkId, encodeIdSegment, formatBytes, isAbsent, plainApiError } from './util.js';
import { $, h, show } from './dom.js';
import { apiError, callApi } from './api.js';
import { addressOf, refreshDomain, state } from './cluster.js';
import { search } from './search.js';

/**
 * Largest attachment read from disk: the domains' default content limit
 * (`limits.max_content_bytes`, 8 MiB); a domain configured higher still
 * refuses what is over its own limit with a clear error.
 */
const MAX_ATTACHMENT = 8 * 1024 * 1024;

/** A function showing one card of class `cls` (with its text) in `out`; an error card is an alert. */
function cardIn(out) {
  return (cls, ...text) => show(out, h('div', { class: `card ${cls}`, role: cls === 'error' ? 'alert' : null }, ...text));
}

// ---------------------------------------------------------------- add

/** The chosen file as base64, or undefined when none was chosen; throws when it is too large. */
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

/** The add form: checks it, then stores the record at the chosen domain (PUT /v1/archives/{id}). */
export async function addRecord(form) {
  const out = $('add-result');
  const say = cardIn(out);
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
  if (existing.status !== 200 && !isAbsent(existing)) {
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

/** The delete form: finds which domain holds the record, and asks to confirm. */
export async function findForDelete(raw) {
  const out = $('delete-result');
  const say = cardIn(out);
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
  if (isAbsent(answer)) return say('absent', `No domain holds ${id}; there is nothing to delete. 任何档案域均无此档案，无需删除。`);
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
      h('button', { type: 'button', class: 'secondary', onclick: () => show(out) }, '取消 Cancel')));
}

/** Once confirmed: deletes the record at the domain that holds it (DELETE /v1/archives/{id}). */
async function deleteAt(id, owner) {
  const out = $('delete-result');
  const say = cardIn(out);
  const address = addressOf(owner);
  if (!address) return say('error', `Domain ${owner} is no longer in the cluster view. Nothing was deleted.`);
  say('pending', `Deleting ${id} from domain ${owner}… 删除中…`);
  let answer;
  try {
    answer = await callApi(address, `/v1/archives/${encodeIdSegment(id)}`, { method: 'DELETE' });
  } catch {
    return say('error', `${plainApiError(owner, null)} Nothing was deleted. 未删除任何内容。`);
  }
  if (answer.status === 204) {
    say('success', `Deleted ${id} from domain ${owner}. 已从档案域 ${owner} 删除。`);
    $('delete-form').reset();
    await refreshDomain(owner);
    return;
  }
  if (isAbsent(answer)) return say('absent', `Domain ${owner} no longer holds ${id}: it was already deleted. 档案已被删除。`);
  say('error', plainApiError(owner, apiError(answer)));
}
