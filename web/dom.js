// Small DOM helpers shared by every part of the page, so that none of them builds elements its own way.
//
// Imports nothing: every other module of the page may use these.

/** The element with this id. */
export const $ = (id) => document.getElementById(id);

/** Replaces an element's children, leaving out the empty ones. */
export function show(el, ...nodes) {
  el.replaceChildren(...nodes.flat(Infinity).filter((n) => n !== null && n !== undefined && n !== false));
}

/** Builds an element: h('p', { class: 'x' }, 'text', child, ...). */
export function h(tag, attrs = {}, ...children) {
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

/**
 * Wraps `work` so that `button` is disabled while it runs; an error it
 * throws is logged, not raised.
 */
export function busy(button, work) {
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
