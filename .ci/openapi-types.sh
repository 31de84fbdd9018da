#!/usr/bin/env bash
# A receiver's types generated from Herald's OpenAPI document compile:
# TestCatalogOpenAPIWebhooks (which also validates the document against the
# OpenAPI 3.1 specification) writes the document it served, with an event
# type in two versions; openapi-typescript generates TypeScript types from
# its webhooks section; tsc --strict compiles a receiver using them.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=interop/openapi-types
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
HERALD_OPENAPI_OUT="$tmp/openapi.json" go test -count=1 -run 'TestCatalogOpenAPIWebhooks$' ./internal/app/
(cd "$dir" && npm ci --no-audit --no-fund >/dev/null \
  && npx openapi-typescript "$tmp/openapi.json" -o herald.d.ts \
  && npx tsc --strict --noEmit --target es2022 --module nodenext --moduleResolution nodenext receiver.ts)
echo "receiver types generated from /openapi.json compile"
