#!/usr/bin/env bash
# The console's browser test (ctest console_browser): console.test.mjs in
# Debian's headless chromium through playwright-core. Exits 77 (ctest: skipped)
# when chromium, node or npm is missing (bash scripts/install-deps.sh
# --with-browser installs them); installs playwright-core from
# package-lock.json with `npm ci` when node_modules is missing or older than
# the lock (no browser is downloaded: the system's chromium is driven).
#   bash tests/browser/run.sh WORLDSTATED ARTIFACT_DIR [--docs DIR]
set -euo pipefail
cd "$(dirname "$0")"
daemon=$1 artifacts=$2
shift 2
chromium=${WS_CHROMIUM:-/usr/bin/chromium}
for need in "$chromium" node npm; do
  if ! command -v "$need" > /dev/null; then
    echo "console_browser: SKIPPED: $need not found (bash scripts/install-deps.sh --with-browser)"
    exit 77
  fi
done
if ! cmp -s package-lock.json node_modules/.ws-lock; then
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error
  cp package-lock.json node_modules/.ws-lock
fi
WS_DAEMON=$daemon WS_ARTIFACTS=$artifacts WS_CHROMIUM=$chromium exec node console.test.mjs "$@"
