#!/bin/sh
# Runs a command next to a real `agentd serve` of its own, then stops it.
#
#   with_agentd.sh AGENTD RULES_DIR PORT -- COMMAND [ARGS...]
#
# The daemon gets a fresh state directory, work root and unix socket, and a
# loopback TCP listener on 127.0.0.1:PORT with a fresh bearer token. The
# command sees BULWARK_SOCKET, BULWARK_URL, BULWARK_TOKEN and
# BULWARK_DAEMON_DIR (the daemon's log is agentd.log in it). Exits with the
# command's status; 77 (skip) when not root: the daemon runs real sandboxes.
set -eu
if [ $# -lt 5 ] || [ "$4" != "--" ]; then
  echo "usage: with_agentd.sh AGENTD RULES_DIR PORT -- COMMAND [ARGS...]" >&2
  exit 2
fi
agentd=$1 rules=$2 port=$3
shift 4
if [ "$(id -u)" != 0 ]; then echo "with_agentd: privileged tier: needs root (run the suite as root)"; exit 77; fi

dir=$(mktemp -d /tmp/bulwark-with-agentd-XXXXXX)
chmod 0711 "$dir"  # the sandbox uid must reach the task work directories
# A BPF pin root and cgroup parent of its own: daemons sharing one ring buffer
# read each other's events (recorded as foreign there), which would take the
# records of this daemon's runs away from it while other tiers run.
name=bulwark-with-agentd-$$
pin_root=/sys/fs/bpf/$name
v2=$(awk '{ for (i = 1; i <= NF; i++) if ($i == "-") { if ($(i + 1) == "cgroup2") print $5; break } }' /proc/self/mountinfo | head -n 1)
own=$(sed -n 's/^0:://p' /proc/self/cgroup)
cgroup_parent=$v2${own%/}/$name
pid=
cleanup() {
  if [ -n "$pid" ]; then
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$dir" "$pin_root"
  rmdir "$cgroup_parent" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

token=$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')
hash=$(printf '%s\n' "$token" | "$agentd" token-hash)
printf 'api:\n  tokens_sha256: ["%s"]\n' "$hash" > "$dir/agentd.yaml"

"$agentd" serve --config "$dir/agentd.yaml" --state-dir "$dir/state" --work-root "$dir/work" \
  --socket "$dir/agentd.sock" --http "127.0.0.1:$port" --rules "$rules" \
  --bpf-pin-root "$pin_root" --bpf-cgroup-parent "$cgroup_parent" > "$dir/agentd.log" 2>&1 &
pid=$!

up=
i=0
while [ $i -lt 200 ]; do
  if ! kill -0 "$pid" 2>/dev/null; then break; fi
  if [ -S "$dir/agentd.sock" ] && python3 - "$dir/agentd.sock" <<'PY' 2>/dev/null
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(2)
s.connect(sys.argv[1])
s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: agentd\r\nConnection: close\r\n\r\n")
sys.exit(0 if s.recv(64).startswith(b"HTTP/1.1 200") else 1)
PY
  then up=1; break; fi
  sleep 0.05
  i=$((i + 1))
done
if [ -z "$up" ]; then
  echo "with_agentd: agentd serve did not come up:" >&2
  cat "$dir/agentd.log" >&2
  exit 1
fi

export BULWARK_SOCKET="$dir/agentd.sock" BULWARK_URL="http://127.0.0.1:$port" BULWARK_TOKEN="$token"
export BULWARK_DAEMON_DIR="$dir"
status=0
"$@" || status=$?
if [ $status -ne 0 ]; then
  echo "with_agentd: the command failed ($status); the daemon's log ends:" >&2
  tail -n 40 "$dir/agentd.log" >&2
fi
exit $status
