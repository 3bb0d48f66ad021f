#!/usr/bin/env bash
# test_man_pages: each hand-written man page (packaging/man/, configured into the
# build) renders without a single groff warning, and names every long flag its
# program's --help prints: a flag added to a program without its line in the
# page fails here. Skips (77) where groff is missing.
#   man_check.sh PROGRAM PAGE [PROGRAM PAGE]...
set -euo pipefail
command -v groff > /dev/null || { echo "man_check: no groff, skipped"; exit 77; }
fail=0
while [[ $# -ge 2 ]]; do
  prog=$1 page=$2
  shift 2
  warnings=$(groff -k -man -ww -z "$page" 2>&1)
  [[ -z "$warnings" ]] || { echo "FAIL: $page: $warnings"; fail=1; }
  # The source with troff's escapes taken out: \- is -, font changes go.
  text=$(sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' "$page")
  n=0
  for flag in $("$prog" --help | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u); do
    n=$((n + 1))
    grep -qE -- "${flag}([^a-z0-9-]|\$)" <<< "$text" ||
      { echo "FAIL: $page does not describe $flag (in $(basename "$prog") --help)"; fail=1; }
  done
  [[ $n -gt 2 ]] || { echo "FAIL: $(basename "$prog") --help printed no flags"; fail=1; }
  echo "man_check: $(basename "$page"): $n flags of --help described"
done
exit $fail
