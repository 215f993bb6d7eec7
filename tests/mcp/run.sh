#!/bin/sh
# CTest tier mcp_sdk: installs the pinned MCP SDK (package-lock.json) into the
# build directory and runs mcp_sdk_test.mjs there. Usage: run.sh BUILD_DIR
# (AGENTD and RULES_DIR come from CTest's environment).
set -eu
src=$(cd "$(dirname "$0")" && pwd)
work=$1
if [ "$(id -u)" != 0 ]; then echo "mcp_sdk: privileged tier: needs root (run the suite as root)"; exit 77; fi
if ! command -v node >/dev/null 2>&1; then echo "mcp_sdk: node is not installed (apt-get install nodejs npm)"; exit 77; fi
mkdir -p "$work"
if ! cmp -s "$src/package-lock.json" "$work/package-lock.json" || [ ! -d "$work/node_modules/@modelcontextprotocol/sdk" ]; then
  if ! command -v npm >/dev/null 2>&1; then echo "mcp_sdk: npm is not installed (apt-get install npm)"; exit 77; fi
  cp "$src/package.json" "$src/package-lock.json" "$work/"
  if ! (cd "$work" && npm ci --no-audit --no-fund --loglevel=error >npm-ci.log 2>&1); then
    echo "mcp_sdk: npm ci of @modelcontextprotocol/sdk failed (registry unreachable?): see $work/npm-ci.log"
    exit 77
  fi
fi
cp "$src/mcp_sdk_test.mjs" "$work/"
exec node "$work/mcp_sdk_test.mjs"
