// ui.js — small DOM helpers shared by the pages.

// h('td', {class: 'num'}, 'text', node, ...): an element; attributes starting
// with "on" are event listeners; null/false children are skipped.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

export function table(head, rows) {
  return h('table', {},
    h('thead', {}, h('tr', {}, head.map((t) => h('th', {}, t)))),
    h('tbody', {}, rows));
}

export const time = (ms) => (ms ? new Date(ms).toLocaleString() : '—');
export const pct = (x) => (x === null || x === undefined ? '—' : `${(100 * x).toFixed(1)}%`);
export const num = (x, digits = 3) => (x === null || x === undefined ? '—' : Number(x).toFixed(digits));

// A fact as text: "mary,location,kitchen", or "vector[8]".
export const factText = (f) => (f.fact ? f.fact.join(',') : `vector[${(f.vector || []).length}]`);

// An error box; a 401 says what to do about it.
export function errorBox(e) {
  const hint = e.status === 401 ? ' — this daemon needs an API key: enter one above.' : '';
  return h('p', { class: 'error', 'data-error': e.code || 'error' }, `${e.message || e}${hint}`);
}

// kv({a: 1}): a definition list of names and values.
export const kv = (obj) =>
  h('dl', { class: 'kv' }, Object.entries(obj).flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
