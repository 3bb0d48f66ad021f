// app.js — the console's entry: the API key form and a router over the URL's
// hash (#/sessions, #/sessions/ID, #/models, #/health). Each page module
// exports render(main, ...params), which may return a function to call when
// the page is left (to stop a live refresh).
import { apiKey } from './api.js';
import * as sessions from './sessions.js';
import * as session from './session.js';
import * as models from './models.js';
import * as health from './health.js';

const routes = [
  [/^#\/sessions\/([0-9a-f]+)$/, session, 'sessions'],
  [/^#\/sessions$/, sessions, 'sessions'],
  [/^#\/models$/, models, 'models'],
  [/^#\/health$/, health, 'health'],
];

let leave = null;

async function route() {
  if (leave) leave();
  leave = null;
  const hash = location.hash || '#/sessions';
  const found = routes.find(([re]) => re.test(hash));
  if (!found) {
    location.hash = '#/sessions';
    return;
  }
  const [re, page, tab] = found;
  for (const a of document.querySelectorAll('nav a')) a.classList.toggle('on', a.dataset.page === tab);
  const main = document.getElementById('main');
  main.replaceChildren();
  leave = (await page.render(main, ...hash.match(re).slice(1))) || null;
}

function showKeyState() {
  document.getElementById('key-state').textContent = apiKey.get() ? 'key set for this tab' : 'no key';
}

document.getElementById('key-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const input = document.getElementById('key');
  apiKey.set(input.value.trim());
  input.value = '';
  showKeyState();
  route();
});
document.getElementById('key-forget').addEventListener('click', () => {
  apiKey.set('');
  showKeyState();
  route();
});
window.addEventListener('hashchange', route);
showKeyState();
route();
