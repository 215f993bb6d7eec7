#!/bin/sh
# CTest tier mcp_sdk: runs mcp_sdk_test.mjs in the build directory, where the
# build step (bulwark_npm_tier) installed the pinned MCP SDK. Usage: run.sh
# BUILD_DIR (AGENTD and RULES_DIR come from CTest's environment).
set -eu
work=$1
if [ "$(id -u)" != 0 ]; then echo "mcp_sdk: privileged tier: needs root (run the suite as root)"; exit 77; fi
[ -d "$work/node_modules/@modelcontextprotocol/sdk" ] ||
  { echo "mcp_sdk: no @modelcontextprotocol/sdk in $work/node_modules: the build step (npm ci) did not run"; exit 1; }
exec node "$work/mcp_sdk_test.mjs"
