// console.test.mjs — drives the web console (server/daemon/console/) in Debian's
// headless Chromium through playwright-core (no browser download): starts a real
// worldstated on loopback, steps a session through the API, and checks in the
// page that the session is listed, its step log shows the facts and answers, the
// heat map is drawn, a step posted from the page's form is applied (seen through
// the API), and that a daemon with keys refuses the page's calls without the key
// and answers them with it. Screenshots go to $WS_ARTIFACTS; with --docs DIR,
// one screenshot of each page also goes to DIR (docs/console/).
//   node console.test.mjs            (run.sh sets WS_DAEMON, WS_ARTIFACTS, WS_CHROMIUM)
import { spawn, execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';

const DAEMON = process.env.WS_DAEMON;
const CHROMIUM = process.env.WS_CHROMIUM || '/usr/bin/chromium';
const ART = process.env.WS_ARTIFACTS || join(tmpdir(), 'ws-console-artifacts');
const docsAt = process.argv.indexOf('--docs');
const DOCS = docsAt > 0 ? process.argv[docsAt + 1] : null;
const TIMEOUT = 60000; // per wait: a loaded 2-core machine is slow, never wrong

let passed = 0;
function check(what, cond) {
  assert.ok(cond, what);
  passed++;
  console.log(`ok ${passed} - ${what}`);
}

// Starts worldstated on a free loopback port; resolves with {url, proc} once it listens.
function startDaemon(dir) {
  return new Promise((resolve, reject) => {
    const proc = spawn(DAEMON, ['--data-dir', dir, '--listen', '127.0.0.1:0', '--threads', '2'],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, OMP_NUM_THREADS: '1' } });
    let log = '';
    const timer = setTimeout(() => reject(new Error(`daemon did not start:\n${log}`)), TIMEOUT);
    proc.stderr.on('data', (d) => (log += d));
    proc.stdout.on('data', (d) => {
      log += d;
      const m = log.match(/listening on (http:\/\/127\.0\.0\.1:\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve({ url: m[1], proc });
      }
    });
    proc.on('exit', (code) => reject(new Error(`daemon exited (${code}):\n${log}`)));
  });
}

// SIGTERM; checks that it exits 0 (a sanitizer's report at exit would not).
async function stopDaemon(d) {
  const code = await new Promise((resolve) => {
    d.proc.removeAllListeners('exit');
    d.proc.on('exit', resolve);
    d.proc.kill('SIGTERM');
  });
  check('the daemon stops cleanly', code === 0);
}

async function call(base, path, { method = 'GET', body, key } = {}) {
  const headers = { 'Content-Type': 'application/json' };
  if (key) headers.Authorization = `Bearer ${key}`;
  const res = await fetch(base + path, { method, headers, body: body && JSON.stringify(body) });
  return { status: res.status, json: res.headers.get('content-type')?.includes('json') ? await res.json() : null };
}

const fact = (...f) => ({ fact: f });

async function shot(page, name) {
  await page.screenshot({ path: join(ART, `${name}.png`), fullPage: true });
  if (DOCS) copyFileSync(join(ART, `${name}.png`), join(DOCS, `${name}.png`));
}

// Pixels of the canvas matched by selector that are not white (colour: 0) or
// that are coloured, not grey (colour: 1: a chart's lines, not its axes).
const inkOf = (page, selector, colour = 0) => page.$eval(selector, (c, colour) => {
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 0; i < d.length; i += 4) {
    const [r, g, b] = [d[i], d[i + 1], d[i + 2]];
    if (colour ? Math.max(r, g, b) - Math.min(r, g, b) > 60 : Math.min(r, g, b) < 250) n++;
  }
  return n;
}, colour);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Steps that tell the session a new fact each: training examples, and load.
async function stepMany(base, sid, n, pauseMs = 0) {
  for (let i = 0; i < n; i++) {
    await call(base, `/v1/sessions/${sid}/steps`, { method: 'POST',
      body: { instructions: [{ ...fact(`item${i}`, 'in', `box${i % 3}`), value: true }], queries: [fact(`item${i}`, 'in', `box${i % 3}`)] } });
    if (pauseMs) await sleep(pauseMs);
  }
}

async function openMode(browser, dir) {
  const d = await startDaemon(dir);
  try {
    const base = d.url;
    const s = await call(base, '/v1/sessions', { method: 'POST', body: {} });
    check('a session is created through the API', s.status === 201);
    const sid = s.json.id;
    const steps = [
      { instructions: [{ ...fact('anna', 'location', 'kitchen'), value: true }],
        queries: [fact('anna', 'location', 'kitchen'), fact('anna', 'location', 'garden')] },
      { instructions: [{ ...fact('door', 'open'), value: true }], queries: [fact('door', 'open')] },
    ];
    for (const body of steps) check('a step is applied through the API', (await call(base, `/v1/sessions/${sid}/steps`, { method: 'POST', body })).status === 200);

    const page = await browser.newPage({ viewport: { width: 1100, height: 760 } });
    page.setDefaultTimeout(TIMEOUT);
    const t0 = Date.now();
    const resp = await page.goto(`${base}/`, { waitUntil: 'load' });
    const loadMs = Date.now() - t0;
    check('GET / serves the console as HTML', resp.status() === 200 && resp.headers()['content-type'].startsWith('text/html'));
    await page.waitForSelector(`tr[data-session="${sid}"]`);
    const row = await page.textContent(`tr[data-session="${sid}"]`);
    check('the session is listed with its model and step', row.includes('default') && row.includes('2'));
    const weight = await page.evaluate(() => performance.getEntriesByType('resource')
      .concat(performance.getEntriesByType('navigation'))
      .filter((e) => !e.name.includes('/v1/'))
      .reduce((s, e) => s + e.encodedBodySize, 0));
    const nav = await page.evaluate(() => performance.getEntriesByType('navigation')[0].toJSON());
    console.log(JSON.stringify({ console_bytes: weight, load_ms: loadMs, dom_content_loaded_ms: Math.round(nav.domContentLoadedEventEnd), load_event_ms: Math.round(nav.loadEventEnd) }));
    await shot(page, 'sessions');

    await page.click(`a[href="#/sessions/${sid}"]`);
    await page.waitForSelector('tr[data-step="2"]');
    const log = await page.textContent('table');
    check('the step log shows the posted instructions', log.includes('anna,location,kitchen=true') && log.includes('door,open=true'));
    check('the step log shows the queries and their answers', log.includes('anna,location,garden') && /yes/.test(log) && /0\.\d{3}/.test(log));
    await page.waitForSelector('#heatmap');
    const ink = await inkOf(page, '#heatmap');
    check(`the heat map canvas is drawn (${ink} non-white pixels)`, ink > 100);
    await page.waitForSelector('#changes figure');
    check('the change chart has a panel for step 2', (await page.textContent('#changes')).includes('step 2'));
    await shot(page, 'session');

    await page.fill('#instructions', 'bob,location,garden=true');
    await page.fill('#queries', 'bob,location,garden\nbob,location,kitchen');
    await page.click('#do-step');
    await page.waitForSelector('tr[data-step="3"]');
    const after = await call(base, `/v1/sessions/${sid}`);
    const last = await call(base, `/v1/sessions/${sid}/steps?after=2`);
    check('a step posted from the form is applied (API: step 3)', after.json.step === 3);
    check('the form\'s step is in the log as sent', JSON.stringify(last.json.steps[0].instructions) === JSON.stringify([{ fact: ['bob', 'location', 'garden'], value: true }]) && last.json.steps[0].queries.length === 2);
    check('the form shows the step\'s answers', (await page.textContent('#answers')).includes('bob,location,garden'));
    await page.fill('#queries', 'anna,location,kitchen');
    await page.click('#do-query');
    await page.waitForFunction(() => document.querySelector('#answers')?.textContent.includes('Queries at step 3'));
    check('query only leaves the session at step 3', (await call(base, `/v1/sessions/${sid}`)).json.step === 3);

    // Online training on every example, a candidate each: a few steps make updates and gate decisions.
    check('training is set to update on every example', (await call(base, '/v1/models/default/training', { method: 'PATCH', body: { update_every: 1, publish_every: 1 } })).status === 200);
    // The engine trains when idle, on what is ready then: a step at a time, each waited for.
    let hist = null;
    for (let i = 0; i < 3; i++) {
      await stepMany(base, sid, 1);
      for (const until = Date.now() + TIMEOUT; Date.now() < until; await sleep(100)) {
        hist = (await call(base, '/v1/models/default/training/history')).json;
        if (hist.points.length > i) break;
      }
    }
    check(`the training history has updates with gate decisions (${hist.points.length} points)`, hist.points.length >= 2 && hist.points.some((p) => p.gate));
    // Rules: eight people's moves, the old place labelled false, make `location` a rule.
    check('rules are turned on', (await call(base, '/v1/models/default/training', { method: 'PATCH', body: { rules: true } })).status === 200);
    const rsid = (await call(base, '/v1/sessions', { method: 'POST', body: {} })).json.id;
    for (let p = 0; p < 8; p++) {
      await call(base, `/v1/sessions/${rsid}/steps`, { method: 'POST', body: { instructions: [{ fact: [`p${p}`, 'location', 'kitchen'], value: true }] } });
      await call(base, `/v1/sessions/${rsid}/steps`, { method: 'POST', body: { instructions: [{ fact: [`p${p}`, 'location', 'garden'], value: true }], queries: [{ fact: [`p${p}`, 'location', 'kitchen'] }], labels: [false] } });
    }
    await page.goto(`${base}/#/models`);
    await page.waitForSelector('section[data-model="default"] canvas.loss-chart');
    check('the models page lists the rule learned', /location \(1\)\s*2 of 3\s*8 \/ 0\s*holds/.test(await page.textContent('section[data-model="default"] table.rules')));
    check('the models page shows the default model and its versions', (await page.textContent('section[data-model="default"]')).includes('current'));
    check('the models page shows the replay anchor', /replay anchor\s*version \d+/.test(await page.textContent('section[data-model="default"]')));
    check('the loss chart draws the history', (await inkOf(page, 'section[data-model="default"] canvas.loss-chart', 1)) > 50);
    check('the gate chart draws the history', (await inkOf(page, 'section[data-model="default"] canvas.gate-chart', 1)) > 50);
    await shot(page, 'models');

    await page.goto(`${base}/#/health`);
    await page.waitForFunction(() => document.querySelector('#readiness')?.textContent === 'ready');
    const load = stepMany(base, sid, 60, 100); // steps/s above zero while the page looks
    await page.waitForFunction(() => document.querySelector('#rate-chart').dataset.samples >= 3 &&
      /steps\/s[1-9]/.test(document.querySelector('main').textContent.replace(/\s/g, '')));
    check('the health page shows readiness and a live step rate', true);
    await shot(page, 'health');
    await load;
    await page.close();
  } finally {
    await stopDaemon(d);
  }
}

async function keyedMode(browser, dir) {
  const key = execFileSync(DAEMON, ['key', 'create', '--create', '--tenant', 'acme', '--data-dir', dir], { stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim();
  const d = await startDaemon(dir);
  try {
    const base = d.url;
    check('the keyed daemon refuses the API without a key', (await call(base, '/v1/sessions')).status === 401);
    const s = await call(base, '/v1/sessions', { method: 'POST', body: {}, key });
    check('a session is created with the key', s.status === 201);
    const page = await browser.newPage({ viewport: { width: 1100, height: 500 } });
    page.setDefaultTimeout(TIMEOUT);
    const refused = [];
    page.on('response', (r) => r.url().includes('/v1/') && r.status() === 401 && refused.push(r.url()));
    const resp = await page.goto(`${base}/`);
    check('the console itself needs no key', resp.status() === 200);
    await page.waitForSelector('[data-error="unauthorized"]');
    check('without the key the page\'s API calls are refused (401)', refused.length > 0 && (await page.$(`tr[data-session="${s.json.id}"]`)) === null);
    await shot(page, 'keyed-refused');
    await page.fill('#key', key);
    await page.click('#key-use');
    await page.waitForSelector(`tr[data-session="${s.json.id}"]`);
    check('with the key typed in, the page lists the tenant\'s session', true);
    check('the key is kept in sessionStorage only', await page.evaluate((k) => sessionStorage.getItem('worldstate.key') === k && !localStorage.length && !document.cookie, key));
    await page.close();
  } finally {
    await stopDaemon(d);
  }
}

async function main() {
  assert.ok(DAEMON, 'WS_DAEMON must name worldstated');
  mkdirSync(ART, { recursive: true });
  if (DOCS) mkdirSync(DOCS, { recursive: true });
  const root = mkdtempSync(join(tmpdir(), 'ws-console-'));
  // Flags: no sandbox as root; no background networking (this machine has no network).
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'] });
  try {
    await openMode(browser, join(root, 'open'));
    await keyedMode(browser, join(root, 'keyed'));
  } finally {
    await browser.close();
  }
  rmSync(root, { recursive: true, force: true });
  console.log(`${passed} passed, 0 failed`);
  console.log(`screenshots in ${ART}`);
}

main().catch((e) => {
  console.error(`not ok - ${e.message}`);
  console.log(`${passed} passed, 1 failed`);
  process.exit(1);
});
