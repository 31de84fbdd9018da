#!/usr/bin/env bash
# Checks deploy/systemd/herald.service with systemd-analyze verify (skipped
# when systemd-analyze is not installed), against a freshly built binary in
# place of /usr/local/bin/herald.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
if ! command -v systemd-analyze >/dev/null; then
  echo "systemd-analyze not installed: unit not verified"; exit 0
fi
D="$(mktemp -d)"
trap 'rm -rf "$D"' EXIT
go build -o "$D/herald" ./cmd/herald
sed "s#/usr/local/bin/herald#$D/herald#" deploy/systemd/herald.service > "$D/herald.service"
# verify exits 0 on directives it ignores: any message is a failure.
OUT="$(systemd-analyze verify "$D/herald.service" 2>&1)" || { echo "$OUT"; exit 1; }
if [ -n "$OUT" ]; then echo "$OUT"; exit 1; fi
echo "deploy/systemd/herald.service: ok"
