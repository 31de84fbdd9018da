#!/usr/bin/env bash
# Herald interoperability tests: Herald's webhook package and inbound gateway
# against stripe-go, go-github, slack-go, the Standard Webhooks and Svix Go
# libraries, and (through Node) the standardwebhooks and svix npm packages.
# Run from anywhere:
#   bash interop/run.sh [go test flags...]
# Needs Go and Node.js with npm; the npm registry is used only by `npm ci`.
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "interop: node and npm are required (the Node peer tests would be skipped otherwise)" >&2
  exit 1
fi

# Install the exact versions of package-lock.json, unless already there.
want_sw=$(node -p 'require("./node/package-lock.json").packages["node_modules/standardwebhooks"].version')
want_svix=$(node -p 'require("./node/package-lock.json").packages["node_modules/svix"].version')
have() { node -p "try { require('./node/node_modules/$1/package.json').version } catch { '' }"; }
if [[ "$(have standardwebhooks)" != "$want_sw" || "$(have svix)" != "$want_svix" ]]; then
  echo "== npm ci (interop/node)"
  npm ci --prefix node --no-audit --no-fund --loglevel=error
fi

echo "== go test (interop), node $(node --version)"
HERALD_INTEROP_REQUIRE_NODE=1 go test -count=1 "$@" ./...
