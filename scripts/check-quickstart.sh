#!/usr/bin/env bash
# Runs the README's quick start as a new user would paste it (job control on, as in an interactive
# shell), on a free port and a fresh data directory, and checks what it printed. `make quickstart`.
set -euo pipefail
cd "$(dirname "$0")/.."
block=$(awk '/^## Quick start/{f=1} f&&/^```sh/{c=1;next} c&&/^```/{exit} c' README.md)
[ -n "$block" ] || { echo "README.md has no sh block under '## Quick start'" >&2; exit 1; }
port=$(node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})")
data=$(mktemp -d)
trap 'rm -rf "$data" service.log' EXIT
out=$(PORT=$port DATA_DIR=$data timeout 600 bash -m -c "set -e
$block
wait" 2>&1) || { echo "$out"; cat service.log 2>/dev/null; echo "the quick start failed" >&2; exit 1; }
for expected in '"name":"Thesis research"' '"title":"Questions"' '"notes":[' '"retrieval":'; do
  grep -qF "$expected" <<<"$out" || { echo "$out"; echo "the quick start did not print $expected" >&2; exit 1; }
done
if curl -sf "localhost:$port/healthz" > /dev/null; then echo "the service still answers after 'kill %1'" >&2; exit 1; fi
echo "quick start: ok on port $port"
