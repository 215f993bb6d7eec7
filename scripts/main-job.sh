#!/usr/bin/env bash
# The main job: check and explain every shipped rule file with policyc.
set -euo pipefail
BUILD=$1
ROOT=$(cd "$(dirname "$0")/.." && pwd)
"$BUILD/policy-compiler/policyc" --version
"$BUILD/agentd/agentd" --version
