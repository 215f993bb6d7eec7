#!/bin/sh
# Run by microvm_test.sh next to a real `agentd serve` (tests/support/with_agentd.sh):
# the exec API routes a `required` tool into its VM; the reply carries the
# guest's output and exit, the VM's facts, and the VMM's own decisions on the
# host (the guest's own canary reading a file the tool is not granted is
# refused by the VMM's Landlock on the host: two kernels, two checks).
set -eu
api() { curl -s --unix-socket "$BULWARK_SOCKET" -H "Authorization: Bearer $BULWARK_TOKEN" "$@"; }
id=$(api -X POST http://agentd/v1/tasks -d '{"tools":["vmsh"]}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
api -X POST "http://agentd/v1/tasks/$id/exec" \
  -d '{"tool":"vmsh","argv":["dash","-c","echo in-vm; cat /etc/passwd; exit 4"]}' >"$BULWARK_DAEMON_DIR/exec.json"
python3 - "$BULWARK_DAEMON_DIR/exec.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["exit_status"] == 4, d
assert d["stdout"] == "in-vm\n", d["stdout"]
assert "Permission denied" in d["stderr"], d["stderr"]  # the guest's Landlock: /etc/passwd not granted
m = d["report"]["microvm"]
assert m["image"]["digest"].startswith("sha256:") and m["boot_ms"] > 0, m
assert any(x.get("detail", {}).get("exe", "").endswith("qemu-system-x86_64") for x in d["decisions"]), \
    "no decision of the VMM on the host"
print("exec API in a VM: exit 4, guest stdout/stderr, VMM decisions recorded")
PY
