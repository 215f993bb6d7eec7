#!/bin/sh
# CTest tier otlp_export: runs otlp_export_test.mjs in the build directory,
# where the build step (bulwark_npm_tier) installed the pinned OpenTelemetry
# packages. Usage: run.sh BUILD_DIR (AGENTD and RULES_DIR come from CTest's
# environment).
set -eu
work=$1
if [ "$(id -u)" != 0 ]; then echo "otlp_export: privileged tier: needs root (run the suite as root)"; exit 77; fi
[ -d "$work/node_modules/@opentelemetry/otlp-transformer" ] ||
  { echo "otlp_export: no @opentelemetry/otlp-transformer in $work/node_modules: the build step (npm ci) did not run"; exit 1; }
exec node "$work/otlp_export_test.mjs"
