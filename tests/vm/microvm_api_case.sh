#!/bin/sh
# Run by microvm_test.sh next to a real `agentd serve` (tests/support/with_agentd.sh):
# the exec API routes a `required` tool into its VM; the reply carries the
# guest's output and exit, the VM's facts, and the VMM's own decisions on the
# host (the guest's own canary reading a file the tool is not granted is
# refused by the VMM's Landlock on the host: two kernels, two checks); and a
# run in its VM is cancelled through the API.
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
# the VMM's denials are explained under the VMM's own policy, not the tool's
vmm = [x for x in d["denials"] if x["layer"] == "seccomp"]
assert vmm and all("vmm/qemu.yaml" in x["explanation"] or "minimal.yaml" in x["explanation"] for x in vmm), vmm
assert any("vmm/qemu.yaml" in x["explanation"] for x in vmm), vmm
print("exec API in a VM: exit 4, guest stdout/stderr, VMM decisions recorded")
PY

# The task's VM kept warm: the next exec of the tool runs in the VM the
# first left parked (one VMM, no boot), its policy bound in the guest as any
# run's (which run a record of the VMM names: integration-bpf's
# retarget_test); a grant that narrows the tool
# starts a VM of its own (the parked one was started under wider rules); the
# task's close leaves no VMM.
vmms() { pgrep -fc "qemu-system-x86_64 -M microvm" || true; }
[ "$(vmms)" = 1 ] || { echo "after the first exec: $(vmms) VMMs, want the task's one parked" >&2; exit 1; }
api -X POST "http://agentd/v1/tasks/$id/exec" \
  -d '{"tool":"vmsh","argv":["dash","-c","echo warm; cat /etc/passwd; exit 6"]}' >"$BULWARK_DAEMON_DIR/warm.json"
[ "$(vmms)" = 1 ] || { echo "after the second exec: $(vmms) VMMs, want the same one" >&2; exit 1; }
python3 - "$BULWARK_DAEMON_DIR/exec.json" "$BULWARK_DAEMON_DIR/warm.json" <<'PY'
import json, sys
first, d = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert d["exit_status"] == 6 and d["stdout"] == "warm\n", d
assert "Permission denied" in d["stderr"], d["stderr"]
m = d["report"]["microvm"]
assert m["start"] == "warm: run 2 in the task's VM" and m["kept_warm"], m["start"]
assert d["run_id"] != first["run_id"]
layers = {l["name"]: l["state"] for l in d["report"]["layers"]}
for l in ("microvm", "landlock", "seccomp", "bpf"):  # the guest's layers, bound for this run
    assert layers.get(l) == "enforcing", (l, layers)
print("warm task VM: run 2 in the VM run 1 left parked (%d ms in the VM vs %d ms for the first)"
      % (m["wall_ms"], first["report"]["microvm"]["wall_ms"]))
PY
api -X PUT "http://agentd/v1/tasks/$id/grant" -d '{"grant":{"files":[{"path":"${workdir}/out","rights":["write"]}]}}' >"$BULWARK_DAEMON_DIR/grant.json"
api -X POST "http://agentd/v1/tasks/$id/exec" \
  -d '{"tool":"vmsh","argv":["dash","-c","echo narrowed"]}' >"$BULWARK_DAEMON_DIR/narrowed.json"
python3 - "$BULWARK_DAEMON_DIR/narrowed.json" "$BULWARK_DAEMON_DIR/grant.json" <<'PY'
import json, sys
d, g = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert g.get("epoch") == 2, g
assert d["stdout"] == "narrowed\n", d
assert d["epoch"] == 2, d["epoch"]
assert not d["report"]["microvm"]["start"].startswith("warm"), d["report"]["microvm"]["start"]
print("a grant narrowing the tool: a VM of its own (%s), not the parked one" % d["report"]["microvm"]["start"])
PY
[ "$(vmms)" = 1 ] || { echo "after the narrowed exec: $(vmms) VMMs, want its own only" >&2; exit 1; }
api -X DELETE "http://agentd/v1/tasks/$id" >/dev/null
for _ in $(seq 50); do [ "$(vmms)" = 0 ] && break; sleep 0.1; done
[ "$(vmms)" = 0 ] || { echo "the task's close left $(vmms) VMMs" >&2; exit 1; }
echo "the task's close: its warm VM gone"

# A tool that may create nothing in its work directory: the denies of paths
# absent there (base/minimal's ${home}/.ssh) hold by that refusal, in the
# guest's BPF LSM as in its mount layer, and the tool runs; its attempt to make
# the path fails.
id=$(api -X POST http://agentd/v1/tasks -d '{"tools":["vmro"]}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
api -X POST "http://agentd/v1/tasks/$id/exec" \
  -d '{"tool":"vmro","argv":["dash","-c","echo ro-ok; mkdir .ssh && echo made"]}' >"$BULWARK_DAEMON_DIR/ro.json"
python3 - "$BULWARK_DAEMON_DIR/ro.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["stdout"] == "ro-ok\n", d
assert d["exit_status"] != 0 and "made" not in d["stdout"], d
bpf = next(l for l in d["report"]["layers"] if l["name"] == "bpf")
assert bpf["state"] == "enforcing" and "cannot appear" in bpf["detail"] and "/.ssh" in bpf["detail"], bpf
print("read-only work directory in a VM: ran; the absent ~/.ssh deny held by the refusal to create (%s)"
      % bpf["detail"][bpf["detail"].index("denies on paths"):][:160])
PY
api -X DELETE "http://agentd/v1/tasks/$id" >/dev/null

# A grant while the tool runs in its VM: the guest's BPF binding follows it
# (as a running tool's does on the host). The tool appends to a file of its
# work directory (the control: allowed by its rules), waits for a file the
# test makes once the grant confined writes to ${workdir}/out, and appends
# again: refused in the guest.
id=$(api -X POST http://agentd/v1/tasks -d '{"tools":["vmsh"]}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
wd=$(api "http://agentd/v1/tasks/$id" | python3 -c 'import json,sys; print(json.load(sys.stdin)["workdir"])')
api -X POST "http://agentd/v1/tasks/$id/exec" \
  -d '{"tool":"vmsh","argv":["dash","-c","echo 1 >> f && echo before-ok; while [ ! -e go ]; do :; done; echo 2 >> f && echo after-ok || echo after-denied"]}' \
  >"$BULWARK_DAEMON_DIR/switch.json" &
exec_pid=$!
t0=$(date +%s)
until [ -s "$wd/f" ] || [ $(( $(date +%s) - t0 )) -ge 60 ]; do sleep 0.2; done
api -X PUT "http://agentd/v1/tasks/$id/grant" -d '{"grant":{"files":[{"path":"${workdir}/out","rights":["write"]}]}}' >/dev/null
sleep 2  # the Policy frame is on its way before the PUT answers; the guest applies it at once
touch "$wd/go"
wait "$exec_pid"
python3 - "$BULWARK_DAEMON_DIR/switch.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["stdout"] == "before-ok\nafter-denied\n", d
sw = d["report"]["microvm"].get("policy_switches")
assert sw and sw[0]["applied"] and sw[0]["policy_version"] > 0, d["report"]["microvm"]
denied = [x for x in d["denials"] if x.get("layer") == "bpf_lsm"]
assert denied, d["denials"]
print("a grant while the tool runs in its VM: the guest's BPF binding switched (%s), the next write refused there"
      % sw[0]["detail"][:80])
PY
api -X DELETE "http://agentd/v1/tasks/$id" >/dev/null
id=$(api -X POST http://agentd/v1/tasks -d '{"tools":["vmsh"]}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')

# Cancel: a run in its VM ended by POST /v1/tasks/{id}/cancel (what MCP's
# notifications/cancelled sends): the exec answers at once, saying so, and the
# VM is gone.
api -X POST "http://agentd/v1/tasks/$id/exec" \
  -d '{"tool":"vmsh","argv":["dash","-c","echo started; while :; do :; done"],"client_ref":"slow-vm"}' \
  >"$BULWARK_DAEMON_DIR/cancel.json" &
exec_pid=$!
t0=$(date +%s)
n=0
while [ "$n" = 0 ] && [ $(( $(date +%s) - t0 )) -lt 60 ]; do
  sleep 1
  n=$(api -X POST "http://agentd/v1/tasks/$id/cancel" -d '{"client_ref":"slow-vm"}' |
      python3 -c 'import json,sys; print(len(json.load(sys.stdin)["cancelled_runs"]))')
done
wait "$exec_pid"
took=$(( $(date +%s) - t0 ))
python3 - "$BULWARK_DAEMON_DIR/cancel.json" "$n" "$took" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert sys.argv[2] != "0", "no run to cancel within 60 s: %s" % json.dumps(d)[:800]
assert d["exit_status"] == 137 and d["report"]["outcome"] == "signaled", d["report"]
assert int(sys.argv[3]) < 90, "the exec answered only after %s s" % sys.argv[3]
assert "cancelled" in json.dumps(d["report"]), d["report"]
print("exec API in a VM, cancelled: answered in %s s, the report says cancelled" % sys.argv[3])
PY
if pgrep -f "qemu-system-x86_64 -M microvm" >/dev/null; then echo "a VMM is left after the cancel" >&2; exit 1; fi
