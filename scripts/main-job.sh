#!/usr/bin/env bash
# The main job: check, test and explain the shipped rules, run two sandboxed
# tools (one allowed read, one denied), then start agentd with the embedded
# SQLite audit store, the API on its unix socket and the live dashboard on
# 127.0.0.1:7878, and run a scripted agent session against it (files, exec
# and network, allowed and denied) every 30 s for BULWARK_DEMO_ROUNDS rounds
# (default 10); agentd keeps serving until Ctrl-C. BULWARK_HTTP=HOST:PORT
# moves the HTTP listener.
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
SOCK=/run/bulwark/agentd.sock
extra=()
[ -n "${BULWARK_HTTP:-}" ] && extra+=(--http "$BULWARK_HTTP")
echo "== agentd serve: state $STATE, socket $SOCK"
"$AGENTD" serve --state-dir "$STATE" --socket "$SOCK" "${extra[@]}" "$@" &
daemon=$!
trap 'kill -TERM $daemon 2>/dev/null; wait $daemon' INT TERM
for _ in $(seq 1 200); do
  if curl -sf --unix-socket "$SOCK" http://agentd/v1/health >/dev/null 2>&1; then break; fi
  kill -0 "$daemon" 2>/dev/null || { echo "agentd serve exited" >&2; wait "$daemon"; exit 1; }
  sleep 0.1
done
echo "   try: curl --unix-socket $SOCK http://agentd/v1/health"
echo "   the live audit dashboard: open the 'dashboard: http://127.0.0.1:7878/#token=...' address above"

# A scripted agent session against the daemon, once now and then every 30 s
# for a while, so the dashboard shows decisions as they happen.
ROUNDS=${BULWARK_DEMO_ROUNDS:-10}
echo "== demo agent session ($ROUNDS rounds, 30 s apart): files, exec and network, allowed and denied"
python3 "$ROOT/clients/python/examples/demo_session.py" --socket "$SOCK" --rounds "$ROUNDS" --pause 30 || true
echo "== agentd keeps serving (Ctrl-C stops it)"
wait "$daemon"
