// Talking to the domains' API: the one place that knows the API token, adds it to requests and asks for it.
//
// The token is kept for this browser tab only (sessionStorage). A 401 or
// 403 answer shows the token field, with why it is needed.

import { $, h, show } from './dom.js';
import { plainApiError } from './util.js';

/** Requests to a domain give up after this long. */
export const TIMEOUT_MS = 8000;

/** The API token, kept for this browser tab only. */
const TOKEN_KEY = 'xarchive-token';

function authHeaders() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { authorization: `Bearer ${token}` } : {};
}

/** `fetch` with the token added, for the filter reader. */
export function fetchWithToken(url, options = {}) {
  return fetch(url, { ...options, headers: { ...(options.headers || {}), ...authHeaders() } });
}

/** The bytes at `path` of the serving domain (a PDF), with the token; rejects with the API's error message. */
export async function fetchBytes(path) {
  const response = await fetchWithToken(path, { cache: 'no-store' });
  if (!response.ok) {
    let message = `HTTP ${response.status}`;
    try {
      message = (await response.json()).message ?? message;
    } catch {
      // Not the API's JSON error: the status says enough.
    }
    throw new Error(message);
  }
  return new Uint8Array(await response.arrayBuffer());
}

/** Shows the token field, with why it is needed. */
function askForToken(note) {
  $('token-form').hidden = false;
  $('token-note').textContent = note;
}

/**
 * The token field: shown at once when this tab already has a token; a
 * token entered there (or an empty field, which clears it) is kept, then
 * `onChange` is called.
 */
export function startTokenForm(onChange) {
  const tokenForm = $('token-form');
  if (sessionStorage.getItem(TOKEN_KEY)) tokenForm.hidden = false;
  tokenForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const token = $('token').value.trim();
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    else sessionStorage.removeItem(TOKEN_KEY);
    $('token').value = '';
    $('token-note').textContent = token ? 'Token set for this tab. 令牌已设置。' : 'Token cleared. 令牌已清除。';
    onChange();
  });
}

/**
 * Calls a domain's API. Resolves to `{ status, body, ms }` for any HTTP
 * answer; rejects with `{ status: 0, message }` when the domain could not
 * be reached. `quiet`: a 401 or 403 does not show the token field (a view
 * loading by itself, for a role the person may not have).
 */
export async function callApi(base, path, { method = 'GET', body, quiet = false } = {}) {
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
    const why = e.name === 'AbortError' ? `no answer within ${TIMEOUT_MS / 1000} s (${TIMEOUT_MS / 1000} 秒内无应答)` : e.message;
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
  if (quiet) {
    // The view says what it needs in its own panel.
  } else if (response.status === 401) {
    askForToken('This domain needs an API token. 该档案域需要访问令牌。');
  } else if (response.status === 403) {
    askForToken('This token may not do that. 当前令牌无此权限。');
  }
  return { status: response.status, body: parsed, ms: performance.now() - started };
}

/**
 * GETs `path` at the serving domain (`served`) for a view drawn in `out`:
 * the body of a 200, or null once `out` says why not — `describe(answer)`
 * for an error answer (quietly where a token is needed), which domain
 * could not be reached when none came. Null without drawing anything when
 * `stale()` says a newer read took over meanwhile.
 */
export async function readView(out, path, { quiet, served, describe, stale = () => false }) {
  let answer;
  try {
    answer = await callApi('', path, { quiet });
  } catch (e) {
    if (stale()) return null;
    out.dataset.state = 'error';
    show(out, h('p', { class: 'card error' }, plainApiError(served, e)));
    return null;
  }
  if (stale()) return null;
  if (answer.status !== 200) {
    out.dataset.state = 'error';
    const needsToken = answer.status === 401 || answer.status === 403;
    show(out, h('p', { class: needsToken ? 'muted small' : 'card error' }, describe(answer)));
    return null;
  }
  out.dataset.state = 'loaded';
  return answer.body ?? {};
}

/** The error of an answer from `callApi`, as `plainApiError` (util.js) takes it. */
export function apiError(answer) {
  const body = answer.body || {};
  return { status: answer.status, code: body.code || null, message: body.message || '' };
}
