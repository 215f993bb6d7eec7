#!/usr/bin/env bash
# The main job: check, test and explain the shipped rules, run two sandboxed
# tools (one allowed read, one denied), then start agentd with the embedded
# SQLite audit store and the API on its unix socket (Ctrl-C stops it).
# BULWARK_HTTP=127.0.0.1:7878 with a config holding api.tokens_sha256 (see
# `agentd token-hash`) adds the loopback HTTP listener.
set -euo pipefail
BUILD=$1
shift || true
ROOT=$(cd "$(dirname "$0")/.." && pwd)
POLICYC=$BUILD/policy-compiler/policyc
AGENTD=$BUILD/agentd/agentd

echo "== policyc check rules/*.yaml"
"$POLICYC" check --rules-dir "$ROOT/rules" "$ROOT"/rules/*.yaml
echo "== policyc test rules/tests/*.test.yaml"
"$POLICYC" test --rules-dir "$ROOT/rules" "$ROOT"/rules/tests/*.test.yaml | tail -n 3
echo "== policyc explain rules/curl.yaml"
"$POLICYC" explain --rules-dir "$ROOT/rules" "$ROOT/rules/curl.yaml"

work=$(mktemp -d /var/tmp/bulwark-demo.XXXXXX)
chmod 0755 "$work"
echo "hello from the workdir" > "$work/notes.txt"
echo "== agentd run cat notes.txt (allowed)"
"$AGENTD" run --rules "$ROOT/rules" --tool cat --workdir "$work" -- /usr/bin/cat notes.txt || true
echo "== agentd run cat /etc/passwd (outside the rule file: denied)"
"$AGENTD" run --rules "$ROOT/rules" --tool cat --workdir "$work" -- /usr/bin/cat /etc/passwd || true

STATE=${BULWARK_STATE_DIR:-/var/lib/bulwark}
extra=()
[ -n "${BULWARK_HTTP:-}" ] && extra+=(--http "$BULWARK_HTTP")
echo "== agentd serve: state $STATE, socket /run/bulwark/agentd.sock"
echo "   try: curl --unix-socket /run/bulwark/agentd.sock http://agentd/v1/health"
echo "   the live audit dashboard: open the 'dashboard: http://127.0.0.1:7878/#token=...' address it prints"
exec "$AGENTD" serve --state-dir "$STATE" "${extra[@]}" "$@"
