// health.js — readiness, queue depth, steps/s and request latency percentiles
// from the daemon's own /readyz and /metrics (no key needed), refreshed every
// two seconds while the page is open.
import { lineChart } from './draw.js';
import { h, kv, num } from './ui.js';

const EVERY_MS = 2000, KEEP = 90;

// Prometheus text into {name: [{labels, value}]}.
function parseMetrics(text) {
  const out = {};
  for (const line of text.split('\n')) {
    const m = line.match(/^([a-zA-Z_:][\w:]*)(\{([^}]*)\})?\s+(\S+)/);
    if (!m) continue;
    const labels = Object.fromEntries([...(m[3] || '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    (out[m[1]] ||= []).push({ labels, value: Number(m[4]) });
  }
  return out;
}

const total = (mets, name) => (mets[name] || []).reduce((s, x) => s + x.value, 0);

// The latency histogram's cumulative buckets, summed over any labels: [[le, count]].
function buckets(mets) {
  const by = new Map();
  for (const b of mets.worldstate_http_request_seconds_bucket || []) {
    const le = b.labels.le === '+Inf' ? Infinity : Number(b.labels.le);
    by.set(le, (by.get(le) || 0) + b.value);
  }
  return [...by.entries()].sort((a, b) => a[0] - b[0]);
}

// The q-quantile of cumulative buckets (linear within a bucket, as Prometheus does).
function quantile(q, cum) {
  const n = cum.length ? cum[cum.length - 1][1] : 0;
  if (!n) return null;
  let prevLe = 0, prevC = 0;
  for (const [le, c] of cum) {
    if (c >= q * n) {
      if (le === Infinity) return prevLe;
      return prevLe + (le - prevLe) * (c > prevC ? (q * n - prevC) / (c - prevC) : 0);
    }
    [prevLe, prevC] = [le, c];
  }
  return prevLe;
}

export function render(main) {
  const status = h('div', {}), rate = h('canvas', { id: 'rate-chart' }), lat = h('canvas', { id: 'latency-chart' });
  main.append(h('h1', {}, 'Health'), h('section', {}, status),
    h('div', { class: 'grid' }, h('section', {}, rate), h('section', {}, lat)));
  const samples = [];
  let prev = null;
  async function tick() {
    const now = Date.now();
    let ready;
    try {
      const r = await fetch('/readyz', { cache: 'no-store' });
      ready = await r.json();
    } catch (e) {
      ready = { status: 'unreachable', reason: String(e) };
    }
    let mets = {};
    try {
      mets = parseMetrics(await (await fetch('/metrics', { cache: 'no-store' })).text());
    } catch {
      // shown as missing figures
    }
    const cur = { t: now, steps: total(mets, 'worldstate_steps_total'), queries: total(mets, 'worldstate_queries_total'), cum: buckets(mets) };
    // Over the last interval: the counters' and the buckets' differences.
    const dt = prev ? (cur.t - prev.t) / 1000 : 0;
    const recent = prev ? cur.cum.map(([le, c], i) => [le, c - (prev.cum[i]?.[1] || 0)]) : [];
    const s = { t: now, steps: dt ? (cur.steps - prev.steps) / dt : null, queries: dt ? (cur.queries - prev.queries) / dt : null,
      p50: quantile(0.5, recent), p99: quantile(0.99, recent) };
    if (prev) samples.push(s);
    if (samples.length > KEEP) samples.shift();
    rate.dataset.samples = samples.length;
    prev = cur;
    const ms = (x) => (x === null ? '—' : `${num(1000 * x, 1)} ms`);
    status.replaceChildren(kv({
      readiness: h('span', { class: ready.status === 'ready' ? 'yes big' : 'no big', id: 'readiness' }, ready.status),
      reason: ready.reason || '—', 'queue depth': ready.queue_depth ?? '—', durability: ready.durability || '—',
      'steps/s': s.steps === null ? '—' : num(s.steps, 1), 'queries/s': s.queries === null ? '—' : num(s.queries, 1),
      'latency p50 / p90 / p99 (since start)': `${ms(quantile(0.5, cur.cum))} / ${ms(quantile(0.9, cur.cum))} / ${ms(quantile(0.99, cur.cum))}`,
      'latency p50 / p99 (last 2 s)': `${ms(s.p50)} / ${ms(s.p99)}`,
      'steps, queries (since start)': `${cur.steps}, ${cur.queries}`,
    }));
    const clock = (t) => new Date(t).toLocaleTimeString();
    lineChart(rate, [{ label: 'steps/s', color: '#2457c5', points: samples.map((x) => [x.t, x.steps]) },
      { label: 'queries/s', color: '#067647', points: samples.map((x) => [x.t, x.queries]) }], { ymin: 0, xFormat: clock });
    lineChart(lat, [{ label: 'p50 ms', color: '#6941c6', points: samples.map((x) => [x.t, x.p50 === null ? null : 1000 * x.p50]) },
      { label: 'p99 ms', color: '#b42318', points: samples.map((x) => [x.t, x.p99 === null ? null : 1000 * x.p99]) }], { ymin: 0, xFormat: clock });
  }
  tick();
  const timer = setInterval(tick, EVERY_MS);
  return () => clearInterval(timer);
}
