#!/usr/bin/env bash
# Checks and unit-tests the Prometheus alerting rules in deploy/prometheus/.
# Installs promtool from Debian's "prometheus" package when it is missing
# (as root, as on the project's machines and in CI). Only promtool is used:
# no Prometheus server is started (and policy-rc.d or the absence of an init
# system keeps the package's service from starting; it is stopped if it did).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v promtool >/dev/null 2>&1; then
  echo "== installing promtool (Debian package prometheus)"
  start=$(date +%s)
  sudo=""
  if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  # --no-install-recommends: the package recommends node-exporter and its
  # collectors (smartmontools, ipmitool, …), which promtool does not need.
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
    $sudo systemctl stop prometheus || true
  fi
  echo "installed in $(( $(date +%s) - start ))s"
fi
promtool --version | head -1

echo "== promtool check rules"
promtool check rules deploy/prometheus/herald-alerts.yml
echo "== promtool test rules"
promtool test rules deploy/prometheus/herald-alerts.test.yml
