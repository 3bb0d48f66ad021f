// session.js — one session: its state W_t as a heat map, how its tokens
// changed over the newest steps (small multiples), a form to post a step or
// ask queries, and its step log a page at a time.
import { api } from './api.js';
import { heatmap, bars } from './draw.js';
import { h, table, time, num, kv, factText, errorBox } from './ui.js';

const LOG_PAGE = 10;

// "mary,location,kitchen=true" lines into instructions; "mary,location,kitchen" lines into queries.
function parseLines(text, withValue) {
  return text.split('\n').map((l) => l.trim()).filter(Boolean).map((line) => {
    if (!withValue) return { fact: line.split(',').map((s) => s.trim()) };
    const m = line.match(/^(.*)=(true|false)$/);
    if (!m) throw new Error(`"${line}": write an instruction as symbols=true or symbols=false`);
    return { fact: m[1].split(',').map((s) => s.trim()), value: m[2] === 'true' };
  });
}

function answersTable(queries, answers, labels) {
  return table(['query', 'p', 'holds', 'label'], queries.map((q, i) =>
    h('tr', {},
      h('td', { class: 'mono' }, factText(q)),
      h('td', { class: 'num' }, num(answers[i]?.p)),
      h('td', { class: answers[i]?.holds ? 'yes' : 'no' }, answers[i]?.holds ? 'yes' : 'no'),
      h('td', {}, labels ? String(labels[i]) : ''))));
}

async function drawState(box, id) {
  const res = await api(`/v1/sessions/${id}/state`, { raw: true });
  const [rows, cols] = (res.headers.get('X-State-Shape') || '0,0').split(',').map(Number);
  const data = new Float32Array(await res.arrayBuffer());
  if (!rows) return box.replaceChildren(h('p', { class: 'muted' }, 'No state yet: the session is at W_0 until its first step.'));
  const canvas = h('canvas', { id: 'heatmap' });
  box.replaceChildren(canvas);
  const max = heatmap(canvas, data, rows, cols);
  box.append(h('p', { class: 'muted' },
    `W_t at step ${res.headers.get('X-Step')}: ${rows} tokens (rows) × ${cols} (columns); blue −${num(max, 2)} … white 0 … red +${num(max, 2)}`));
}

async function drawChanges(box, id) {
  const r = await api(`/v1/sessions/${id}/state/changes`);
  if (!r.changes.length)
    return box.replaceChildren(h('p', { class: 'muted' },
      'No changes recorded yet (kept in memory for the newest steps since the daemon started; a step from W_0 has none).'));
  const max = Math.max(...r.changes.flatMap((c) => c.norms));
  box.replaceChildren(
    h('div', { class: 'multiples', id: 'changes' }, r.changes.map((c) => {
      const canvas = h('canvas', {});
      bars(canvas, c.norms, max);
      return h('figure', { title: `step ${c.step}, model v${c.model_version}` }, canvas, h('figcaption', {}, `step ${c.step}`));
    })),
    h('p', { class: 'muted' }, `Per step, each of the ${r.state_shape[0]} tokens' change ‖W_t[i] − W_t−1[i]‖ (bars, left to right), on one scale up to ${num(max, 3)}; the newest ${r.window} steps at most.`));
}

async function drawLog(box, id, step, after) {
  const r = await api(`/v1/sessions/${id}/steps?after=${after}&limit=${LOG_PAGE}`);
  const rows = r.steps.map((s) =>
    h('tr', { 'data-step': s.step },
      h('td', { class: 'num' }, s.step),
      h('td', { class: 'mono' }, s.instructions.map((i) => h('div', {}, `${factText(i)}=${i.value}`))),
      h('td', {}, s.queries.length ? answersTable(s.queries, s.answers, s.labels) : h('span', { class: 'muted' }, 'no queries')),
      h('td', { class: 'num' }, s.model_version),
      h('td', {}, time(s.time_ms))));
  box.replaceChildren(
    rows.length ? table(['step', 'instructions', 'queries and answers', 'model', 'time'], rows) : h('p', { class: 'muted' }, 'No steps yet.'),
    h('div', { class: 'pager' },
      h('button', { disabled: after <= 0, onclick: () => drawLog(box, id, step, Math.max(0, after - LOG_PAGE)) }, '← Older'),
      h('span', { class: 'muted' }, rows.length ? `steps ${after + 1}–${after + rows.length} of ${step}` : ''),
      h('button', { disabled: after + LOG_PAGE >= step, onclick: () => drawLog(box, id, step, after + LOG_PAGE) }, 'Newer →')));
}

export async function render(main, id) {
  const head = h('div', {}), stateBox = h('div', {}), changeBox = h('div', {}), logBox = h('div', {});
  const result = h('div', { id: 'answers' });
  const instr = h('textarea', { id: 'instructions', rows: 4, placeholder: 'one instruction a line: anna,location,kitchen=true' });
  const queries = h('textarea', { id: 'queries', rows: 4, placeholder: 'one query a line: anna,location,kitchen' });
  let sess = null;

  async function refresh() {
    try {
      sess = await api(`/v1/sessions/${id}`);
      head.replaceChildren(kv({ id: h('span', { class: 'mono' }, sess.id), model: sess.model, step: sess.step,
        'state version': sess.state_version, created: time(sess.created_ms), updated: time(sess.updated_ms) }));
      await Promise.all([drawState(stateBox, id), drawChanges(changeBox, id),
        drawLog(logBox, id, sess.step, Math.max(0, sess.step - LOG_PAGE))]);
    } catch (e) {
      head.replaceChildren(errorBox(e));
    }
  }

  async function send(stepping) {
    try {
      const q = parseLines(queries.value, false);
      const r = stepping
        ? await api(`/v1/sessions/${id}/steps`, { method: 'POST',
          body: { expect_step: sess.step, instructions: parseLines(instr.value, true), queries: q } })
        : await api(`/v1/sessions/${id}/queries`, { method: 'POST', body: { queries: q } });
      result.replaceChildren(
        h('p', {}, `${stepping ? 'Step' : 'Queries at step'} ${r.step}, model version ${r.model_version}`),
        q.length ? answersTable(q, r.answers) : '');
      if (stepping) {
        instr.value = '';
        await refresh();
      }
    } catch (e) {
      result.replaceChildren(errorBox(e));
      if (e.code === 'step_conflict') await refresh(); // another client stepped it: show where it is
    }
  }

  main.append(
    h('h1', {}, 'Session'),
    h('section', {}, head),
    h('h2', {}, 'Post a step'),
    h('section', {},
      h('form', { class: 'step', onsubmit: (ev) => ev.preventDefault() },
        h('label', {}, 'Instructions', instr), h('label', {}, 'Queries', queries),
        h('div', { class: 'actions' },
          h('button', { id: 'do-step', type: 'button', onclick: () => send(true) }, 'Step (tell, then ask)'),
          h('button', { id: 'do-query', type: 'button', onclick: () => send(false) }, 'Query only (state unchanged)'))),
      result),
    h('h2', {}, 'World state W_t'), h('section', {}, stateBox),
    h('h2', {}, 'How it changed'), h('section', {}, changeBox),
    h('h2', {}, 'Step log'), h('section', {}, logBox));
  await refresh();
}
