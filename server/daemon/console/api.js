// api.js — the console's one way to the daemon: its public REST API, with the
// user's API key (kept in sessionStorage, so it goes when the tab closes) in the
// same Authorization header every client sends. The console's own files need
// no key; every call made here does, as it would from any client.
const STORE = 'worldstate.key';

export const apiKey = {
  get: () => sessionStorage.getItem(STORE) || '',
  set: (k) => (k ? sessionStorage.setItem(STORE, k) : sessionStorage.removeItem(STORE)),
};

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// One request; the parsed JSON, or the Response itself with raw: true.
// Anything but 2xx throws an ApiError with the API's error code and message.
export async function api(path, { method = 'GET', body, raw = false } = {}) {
  const headers = {};
  const key = apiKey.get();
  if (key) headers.Authorization = `Bearer ${key}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: 'no-store',
  });
  if (!res.ok) {
    let e = {};
    try {
      e = (await res.json()).error || {};
    } catch {
      // not JSON: the status says it
    }
    throw new ApiError(res.status, e.code || `http_${res.status}`, e.message || res.statusText);
  }
  if (raw) return res;
  return res.status === 204 ? null : res.json();
}
