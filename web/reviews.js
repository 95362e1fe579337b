// The holding archive's reviewer queue: the requests from other archives that its release policy leaves to people, each approved or refused with a reason.
//
// Reads GET /v1/reviews at the serving domain and decides with
// POST /v1/reviews/{receiving}/{request} (the `reviewer` role; api.js
// sends the token). A refusal needs a reason typed in. The queue is drawn
// again after each decision and when asked; an item being written in is
// never redrawn under the reviewer's hands.

import { plainApiError } from './util.js';
import { $, h, show } from './dom.js';
import { apiError, callApi, readView } from './api.js';
import { state } from './cluster.js';

/** A reviewer's error in plain words. */
function reviewError(answer) {
  const err = apiError(answer);
  switch (err.code) {
    case 'already_decided':
      return 'This request was already decided (by another reviewer, or earlier): nothing was changed. 该申请已经处理过，本次决定未生效。';
    case 'review_not_found':
      return 'This request is no longer waiting for review here. 该申请已不在待审核队列中。';
    case 'invalid_request':
      return `The decision was refused: ${err.message}. 决定未被接受：${err.message}`;
    case 'unauthorized':
    case 'forbidden':
      return 'Reviewing needs a token with the reviewer role: enter one at the top of the page. 审核需要具有审核员（reviewer）权限的令牌，请在页面顶部输入。';
    default:
      return plainApiError(state.served ?? '?', err);
  }
}

/** Shows what a decision did in the queue's result area. */
function say(cls, ...text) {
  show($('reviews-result'), h('div', { class: `card ${cls}`, role: cls === 'error' ? 'alert' : null }, ...text));
}

/** Sends a decision on one item; `reason` is required to refuse. */
async function decide(item, approve, reasonField, buttons) {
  const reason = reasonField.value.trim();
  const what = `request ${item.request_id} from archive ${item.receiving}`; // i18n: part of sentences translated where it is used
  if (!approve && !reason) {
    say('error', `Type the reason for refusing ${what} first. 拒绝前请填写理由。`);
    reasonField.focus();
    return;
  }
  for (const b of buttons) b.disabled = true;
  let answer;
  try {
    answer = await callApi(
      '',
      `/v1/reviews/${encodeURIComponent(item.receiving)}/${encodeURIComponent(item.request_id)}`,
      { method: 'POST', body: approve ? { approve: true } : { approve: false, reason } },
    );
  } catch (e) {
    for (const b of buttons) b.disabled = false;
    say('error', plainApiError(state.served ?? '?', e));
    return;
  }
  if (answer.status === 200) {
    say(
      'success',
      approve
        ? `Approved ${what}: the copies go out at its next delivery. 已批准，复制件将随下次投递发出。`
        : `Refused ${what}. 已拒绝。`,
    );
  } else {
    say('error', reviewError(answer));
  }
  for (const b of buttons) b.disabled = false;
  await loadReviews({ quiet: false });
}

/** One waiting item, with its approve and refuse controls. */
function renderItem(item) {
  const key = `${item.receiving}/${item.request_id}`;
  const reasonField = h('input', {
    type: 'text',
    class: 'refuse-reason',
    autocomplete: 'off',
    'aria-label': 'Reason for refusing 拒绝理由',
    placeholder: '拒绝理由 Reason for refusing',
  });
  const approve = h('button', { type: 'button', class: 'approve' }, '批准 Approve');
  const refuse = h('button', { type: 'button', class: 'danger-outline refuse' }, '拒绝 Refuse');
  const buttons = [approve, refuse];
  approve.addEventListener('click', () => decide(item, true, reasonField, buttons));
  refuse.addEventListener('click', () => decide(item, false, reasonField, buttons));
  return h(
    'li',
    { class: 'review', 'data-key': key, 'data-request': item.request_id },
    h('div', {}, h('strong', {}, item.applicant_name), h('span', { class: 'muted' }, ` · ${item.purpose}`)),
    h(
      'div',
      { class: 'muted small' },
      `来自 from ${item.receiving_name ?? item.receiving} (${item.receiving}) · 申请编号 request `,
      h('code', {}, item.request_id),
      ` · 收到于 received ${item.received_at}`,
    ),
    h(
      'ul',
      { class: 'small review-records' },
      (item.records ?? []).map((r) =>
        h(
          'li',
          { 'data-record': r.id },
          h('code', {}, r.id),
          ' ',
          r.title ?? '（已不在本馆 no longer held here）',
          ' · ',
          r.applicant_named
            ? h('span', { class: 'pill state-ok' }, '申请人在档案所载人员之中 The applicant is named in it')
            : h('span', { class: 'pill state-bad' }, '申请人不在档案所载人员之中 The applicant is not named in it'),
        ),
      ),
    ),
    item.reason ? h('div', { class: 'small reason' }, `需审核的原因 Why it needs review: ${item.reason}`) : null,
    h('div', { class: 'row' }, approve, reasonField, refuse),
  );
}

/**
 * Reads the queue (GET /v1/reviews) and draws it: items already drawn are
 * kept as they are (with any reason being typed), new ones added, decided
 * ones taken away.
 */
export async function loadReviews({ quiet = true } = {}) {
  const out = $('reviews-list');
  const body = await readView(out, '/v1/reviews', { quiet, served: state.served ?? '?', describe: reviewError });
  if (!body) return;
  const reviews = body.reviews ?? [];
  if (reviews.length === 0) {
    show(out, h('p', { class: 'muted' }, 'Nothing waits for review here. 暂无待审核的申请。'));
    return;
  }
  let list = out.querySelector('ol.reviews');
  if (!list) {
    list = h('ol', { class: 'reviews' });
    show(out, list);
  }
  const drawn = new Map([...list.children].map((li) => [li.dataset.key, li]));
  const items = reviews.map((item) => drawn.get(`${item.receiving}/${item.request_id}`) ?? renderItem(item));
  list.replaceChildren(...items);
}
