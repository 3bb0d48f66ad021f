// sessions.js — the tenant's sessions, a page at a time: step, model, updated
// time; a click opens one. "New session" creates one on a model.
import { api } from './api.js';
import { h, table, time, errorBox } from './ui.js';

const PAGE = 20;

export async function render(main) {
  const list = h('div', {});
  const pages = ['']; // the "after" of each page seen, for going back
  const model = h('input', { value: 'default', size: 12, 'aria-label': 'model' });
  const create = async () => {
    try {
      const s = await api('/v1/sessions', { method: 'POST', body: { model: model.value } });
      location.hash = `#/sessions/${s.id}`;
    } catch (e) {
      list.prepend(errorBox(e));
    }
  };
  main.append(
    h('h1', {}, 'Sessions'),
    h('section', {}, h('div', { class: 'pager' }, 'Model', model, h('button', { onclick: create }, 'New session')), list),
  );
  async function show(i) {
    try {
      const r = await api(`/v1/sessions?limit=${PAGE}${pages[i] ? `&after=${pages[i]}` : ''}`);
      if (r.next_after) pages[i + 1] = r.next_after;
      const rows = r.sessions.map((s) =>
        h('tr', { 'data-session': s.id },
          h('td', {}, h('a', { href: `#/sessions/${s.id}`, class: 'mono' }, s.id)),
          h('td', {}, s.model ?? '—'),
          h('td', { class: 'num' }, s.step),
          h('td', {}, time(s.updated_ms))));
      list.replaceChildren(
        rows.length ? table(['id', 'model', 'step', 'updated'], rows) : h('p', { class: 'muted' }, 'No sessions yet.'),
        h('div', { class: 'pager' },
          h('button', { disabled: i === 0, onclick: () => show(i - 1) }, '← Previous'),
          h('span', { class: 'muted' }, `page ${i + 1}`),
          h('button', { disabled: !r.next_after, onclick: () => show(i + 1) }, 'Next →')));
    } catch (e) {
      list.replaceChildren(errorBox(e));
    }
  }
  await show(0);
}
