#!/usr/bin/env bash
# Installs the locked dependencies. `npm ci` first; npm 11 behind some registries writes lock files
# without the other platforms' optional packages (native binaries of swc, esbuild, unrs-resolver)
# and its `npm ci` then refuses them as out of sync, so fall back to installing the same locked
# versions with `npm install --no-save`, which leaves package-lock.json untouched.
set -euo pipefail
cd "$(dirname "$0")/.."
if npm ci --no-audit --no-fund; then exit 0; fi
echo "npm ci refused the lock file; installing the locked versions with npm install --no-save" >&2
npm install --no-save --no-audit --no-fund
