#!/bin/sh
# CTest tier otlp_export: installs the pinned OpenTelemetry packages
# (package-lock.json) into the build directory and runs otlp_export_test.mjs
# there. Usage: run.sh BUILD_DIR (AGENTD and RULES_DIR come from CTest's
# environment).
set -eu
src=$(cd "$(dirname "$0")" && pwd)
work=$1
if [ "$(id -u)" != 0 ]; then echo "otlp_export: privileged tier: needs root (run the suite as root)"; exit 77; fi
if ! command -v node >/dev/null 2>&1; then echo "otlp_export: node is not installed (apt-get install nodejs npm)"; exit 77; fi
mkdir -p "$work"
if ! cmp -s "$src/package-lock.json" "$work/package-lock.json" || [ ! -d "$work/node_modules/@opentelemetry/otlp-transformer" ]; then
  if ! command -v npm >/dev/null 2>&1; then echo "otlp_export: npm is not installed (apt-get install npm)"; exit 77; fi
  cp "$src/package.json" "$src/package-lock.json" "$work/"
  if ! (cd "$work" && npm ci --no-audit --no-fund --loglevel=error >npm-ci.log 2>&1); then
    echo "otlp_export: npm ci of @opentelemetry/otlp-transformer failed (registry unreachable?): see $work/npm-ci.log"
    exit 77
  fi
fi
cp "$src/otlp_receiver.mjs" "$src/otlp_export_test.mjs" "$work/"
exec node "$work/otlp_export_test.mjs"
