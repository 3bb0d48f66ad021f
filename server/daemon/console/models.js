// models.js — every model the key may use: config, training settings and
// status, versions (which is current), the online-training loss and the
// publication gate's scores over time (from the daemon's bounded history),
// the gate's memory probe of the served version, and the rules learned from
// its labels.
import { api } from './api.js';
import { lineChart } from './draw.js';
import { h, table, time, pct, num, kv, errorBox } from './ui.js';

const clock = (ms) => new Date(ms).toLocaleTimeString();

function charts(points) {
  const loss = h('canvas', { class: 'loss-chart' }), gate = h('canvas', { class: 'gate-chart' });
  lineChart(loss, [{ label: 'training loss', color: '#2457c5', points: points.map((p) => [p.time_ms, p.loss]) }],
    { xFormat: clock, empty: 'no training update yet' });
  const gated = points.filter((p) => p.gate);
  const line = (label, color, f) => ({ label, color, points: gated.map((p) => [p.time_ms, f(p.gate), p.gate.verdict === 'rejected']) });
  lineChart(gate, [
    line('probe: served', '#067647', (g) => g.served.probe_accuracy),
    line('probe: candidate', '#b54708', (g) => g.candidate.probe_accuracy),
    line('replay: served', '#6941c6', (g) => g.served.replay_accuracy),
    line('replay: candidate', '#c11574', (g) => g.candidate.replay_accuracy),
  ], { ymin: 0, ymax: 1, xFormat: clock, empty: 'no gate decision yet' });
  return h('div', { class: 'grid' },
    h('figure', {}, loss, h('figcaption', { class: 'muted' }, `loss per update (${points.length} kept)`)),
    h('figure', {}, gate, h('figcaption', { class: 'muted' },
      `publication gate accuracy per decision (${gated.length}; ${gated.filter((p) => p.gate.verdict === 'rejected').length} rejected: squares)`)));
}

function probe(gate) {
  const s = gate.last?.served;
  if (gate.served_probe_accuracy === null && !s) return h('p', { class: 'muted' }, 'Not measured yet: the gate measures the served version at its next decision.');
  const byKind = s?.probe_by_kind || {};
  return kv({
    'probe accuracy': pct(gate.served_probe_accuracy),
    'told true': pct(byKind.told_true), overridden: pct(byKind.overridden), 'never told': pct(byKind.never_told),
    'told moves': pct(byKind.told_moves),
    'best served': pct(gate.best_probe_accuracy), 'replay anchor': `version ${gate.anchor_version}`,
    'published / rejected / restored': `${gate.published} / ${gate.rejected} / ${gate.restored}`,
    'last decision': gate.last ? [gate.last.verdict, gate.last.reason].filter(Boolean).join(': ') : '—',
  });
}

// The rules learned from the model's labels, most evidence first (the
// training setting rules: api.md, Rules learned from labels).
function rules(list) {
  if (!list?.length) return h('p', { class: 'muted' }, 'None learned (the training setting rules is off, or no labels said so yet).');
  const t = table(['anchor (at position)', 'exclusive position', 'labels for / against', ''], list.slice(0, 8).map((r) =>
    h('tr', {}, h('td', {}, `${r.anchor || '—'} (${r.anchor_position})`), h('td', { class: 'num' }, `${r.position} of ${r.arity}`),
      h('td', { class: 'num' }, `${r.exclusive} / ${r.not_exclusive}`), h('td', { class: r.holds ? 'yes' : '' }, r.holds ? 'holds' : ''))));
  t.classList.add('rules');
  return t;
}

async function card(name) {
  const [m, v, hist] = await Promise.all([
    api(`/v1/models/${name}`), api(`/v1/models/${name}/versions`), api(`/v1/models/${name}/training/history`)]);
  const st = m.status || {};
  return h('section', { 'data-model': name },
    h('h2', {}, `${m.name} `, h('span', { class: 'muted' }, `v${m.version} · ${m.origin} · ${m.tenant ?? 'shared'}`)),
    h('div', { class: 'grid' },
      h('div', {}, h('h3', {}, 'Config'), h('p', { class: 'mono' }, Object.entries(m.config).map(([k, x]) => `${k}=${x}`).join(' · '))),
      h('div', {}, h('h3', {}, 'Online training'), kv({ ...Object.fromEntries(Object.entries(m.training).map(([k, x]) => [k, String(x)])),
        serving: `v${st.serving_version}`, updates: st.updates, 'examples trained': st.examples_trained,
        'examples ready': st.examples_ready, 'last loss': num(st.last_loss) })),
      h('div', {}, h('h3', {}, 'Memory probe of the served version'), probe(m.gate))),
    charts(hist.points),
    h('h3', {}, 'Rules learned from labels'),
    rules(m.rules),
    h('h3', {}, 'Versions'),
    table(['version', 'note', 'created', 'current', 'file'], v.versions.slice().reverse().map((x) =>
      h('tr', {}, h('td', { class: 'num' }, x.version), h('td', {}, x.note), h('td', {}, time(x.created_ms)),
        h('td', { class: x.current ? 'yes' : '' }, x.current ? 'current' : ''), h('td', {}, x.available ? 'kept' : 'removed')))));
}

export async function render(main) {
  main.append(h('h1', {}, 'Models'));
  try {
    const { models } = await api('/v1/models');
    for (const m of models) main.append(await card(m.name));
    if (!models.length) main.append(h('p', { class: 'muted' }, 'No models.'));
  } catch (e) {
    main.append(errorBox(e));
  }
}
