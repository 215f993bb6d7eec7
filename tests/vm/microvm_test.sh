#!/usr/bin/env bash
# The microVM tier end to end under qemu TCG (docs/microvm.md): real
# `agentd run` launches of tools whose rules ask for a VM.
#   usage: microvm_test.sh <agentd> <rules dir> <guest image dir> [<escape probe>]
# Exit 0 all passed, 1 a case failed, 77 (skip) when the guest image could not
# be built here (its unavailable.txt says why) or qemu is missing.
set -uo pipefail
agentd=$1 rules_src=$2 image=$3 probe=${4:-}
[ -f "$image/image.json" ] || { echo "SKIP: no guest image: $(cat "$image/unavailable.txt" 2>/dev/null)"; exit 77; }
command -v qemu-system-x86_64 >/dev/null || { echo "SKIP: no qemu-system-x86_64"; exit 77; }
t=$(mktemp -d /tmp/bw-microvm.XXXXXX)
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/rules" "$t/wd" "$t/outside"
# Snapshots of the parked guest of this test only: the first VM boots cold and
# saves one, the next ones restore it.
export BULWARK_MICROVM_SNAPSHOTS=$t/snapshots
cp -r "$rules_src/base" "$rules_src/vmm" "$t/rules/"
chmod 755 "$t"
chown 65534:65534 "$t/wd"  # the tool (and its VMM) run as the work directory's owner
echo "hello from the host workdir" >"$t/wd/notes.txt"
echo "host secret" >"$t/outside/secret.txt"
chmod 644 "$t/wd/notes.txt" "$t/outside/secret.txt"
vm_tool() {  # name mode extra-yaml
  cat >"$t/rules/$1.yaml" <<YAML
tool: $1
extends: base/minimal
binaries: [/usr/bin/dash]
files:
  read: ["\${workdir}"]
  write: ["\${workdir}"]
  create: ["\${workdir}"]
exec:
  allow: [/usr/bin/dash, /usr/bin/cat]
microvm: { mode: $2 }
limits: { timeout: 30s }
$3
YAML
}
fails=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
run() { "$agentd" run --rules "$t/rules" --tool "$1" --workdir "$t/wd" --json -- "${@:2}" 2>"$t/err"; }

# 1. stdout, stderr, exit code and a file written in the work directory,
#    from a tool inside the VM, the run's layers the guest's.
vm_tool vmsh required ""
out=$(run vmsh dash -c 'cat notes.txt; echo to-stderr >&2; echo written-in-vm > made.txt; exit 3')
rc=$?
[ "$rc" = 3 ] && pass "exit code 3 from the guest" || fail "exit code $rc (want 3): $(tail -5 "$t/err") $(echo "$out" | head -c 2000)"
echo "$out" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["stdout"]["data"] == "hello from the host workdir\n", d["stdout"]
assert d["stderr"]["data"] == "to-stderr\n", d["stderr"]
m = d["microvm"]
assert m["image"]["digest"].startswith("sha256:"), m
assert m["guest"]["kernel"], m["guest"]
layers = {l["name"]: l["state"] for l in d["layers"]}
for l in ("microvm", "namespaces", "cgroup", "landlock", "seccomp", "bpf"):
    assert layers.get(l) == "enforcing", (l, layers)
# every BPF program of the guest kernel proven by its canary, so the BPF LSM holds rules there
bpf = next(l for l in d["layers"] if l["name"] == "bpf")["detail"]
assert "lsm/bprm_check_security" in bpf and "attached:" not in bpf and "canary" not in bpf, bpf
assert "bpf_lsm" in d["rules"]["summary"] and "0 held by no layer here" in d["rules"]["summary"], d["rules"]["summary"]
assert any(l["name"] == "landlock" for l in m["vmm_run"]["layers"]), "the VMM confined on the host"
' && pass "stdout, stderr, guest layers (the BPF LSM proven and holding rules) and the VMM's own layers in the report" || fail "report: $(echo "$out" | head -c 3000)"
[ "$(cat "$t/wd/made.txt" 2>/dev/null)" = "written-in-vm" ] && pass "file written in the work directory" ||
  fail "made.txt: $(ls -la "$t/wd")"

# 1b. The next run restores the snapshot the first one made (not a cold boot),
#     with the same result.
out=$(run vmsh dash -c 'cat notes.txt; exit 5')
rc=$?
if [ "$rc" = 5 ] && echo "$out" | python3 -c '
import json, sys
d = json.load(sys.stdin)
m = d["microvm"]
assert m["start"] == "restored from a snapshot", m["start"]
assert d["stdout"]["data"] == "hello from the host workdir\n", d["stdout"]
print("restore to Start:", m["boot_ms"], "ms; VM wall:", m["wall_ms"], "ms")
' >"$t/restore.txt"; then
  pass "second run restored from the snapshot ($(cat "$t/restore.txt"))"
else
  fail "restore: exit $rc: $(echo "$out" | head -c 1500) $(cat "$t/restore.txt")"
fi

# 1c. KVM only where a canary VM of the image answers under it: forced here
#     (BULWARK_KVM_CANARY=always), the canary boots under KVM and must
#     answer, or the run goes to TCG saying what the canary saw; the control is
#     the same canary answering under TCG. On a host whose KVM runs it, the
#     run is under KVM and says it was proven.
out=$(BULWARK_KVM_CANARY=always BULWARK_KVM_CANARY_TIMEOUT_MS=5000 run vmsh dash -c 'cat notes.txt')
rc=$?
if [ "$rc" = 0 ] && echo "$out" | python3 -c '
import json, sys
d = json.load(sys.stdin)
m = d["microvm"]
r = m["accel_reason"]
assert d["stdout"]["data"] == "hello from the host workdir\n", d["stdout"]
if m["accel"] == "kvm":
    assert "proven by a canary VM" in r, r
    print("KVM here, proven by its canary:", r)
else:
    assert m["accel"] == "tcg" and "the KVM canary VM (BULWARK_KVM_CANARY=always): " in r, r
    assert "the same canary under TCG answered in" in r, r
    print("the KVM canary failed, the run under TCG:", r[r.index("the KVM canary VM"):][:260])
' >"$t/canary.txt"; then
  pass "$(cat "$t/canary.txt")"
else
  fail "KVM canary: exit $rc: $(echo "$out" | head -c 1500) $(cat "$t/canary.txt")"
fi

# 2. A host file outside the work directory: not readable from the guest
#    (the guest's layers), and not served by the VMM (its Landlock and view);
#    the same read works in the host's own shell (control).
cat "$t/outside/secret.txt" >/dev/null && pass "control: the host reads $t/outside/secret.txt"
out=$(run vmsh dash -c "cat $t/outside/secret.txt")
rc=$?
echo "$out" | grep -q "host secret" && fail "the guest read a host file outside its work directory" ||
  { [ "$rc" != 0 ] && pass "host file outside the work directory unreadable in the VM (exit $rc)"; }

# 3. required with no usable image: refused (125), naming the rule's file:line:col.
mkdir -p "$t/noimage"
echo "test: no image here" >"$t/noimage/unavailable.txt"
out=$(BULWARK_GUEST_IMAGE=$t/noimage "$agentd" run --rules "$t/rules" --tool vmsh --workdir "$t/wd" -- dash -c 'echo ran' 2>&1)
rc=$?
if [ "$rc" = 125 ] && echo "$out" | grep -q "vmsh.yaml:[0-9]*:[0-9]*.*microvm.mode" && echo "$out" | grep -q "no image here"; then
  pass "required without a guest image: refused, naming the rule and why"
else
  fail "required without an image: exit $rc: $out"
fi
echo "$out" | grep -q "^ran" && fail "the tool ran although refused"

# 4. preferred with no usable image: the host sandbox, said in the report.
vm_tool vmpref preferred ""
out=$(BULWARK_GUEST_IMAGE=$t/noimage "$agentd" run --rules "$t/rules" --tool vmpref --workdir "$t/wd" -- dash -c 'echo ran-on-host' 2>&1)
rc=$?
if [ "$rc" = 0 ] && echo "$out" | grep -q "ran-on-host" && echo "$out" | grep -q "microvm.mode preferred: the tool ran in the host sandbox"; then
  pass "preferred without a guest image: ran on the host, said so"
else
  fail "preferred without an image: exit $rc: $out"
fi

# 5. confidential: refused here with the reason, never run.
vm_tool vmconf required "unenforceable: run"
sed -i 's/microvm: { mode: required }/microvm: { mode: required, confidential: required }/' "$t/rules/vmconf.yaml"
out=$("$agentd" run --rules "$t/rules" --tool vmconf --workdir "$t/wd" -- dash -c 'echo ran' 2>&1)
rc=$?
if [ "$rc" = 125 ] && echo "$out" | grep -q "vmconf.yaml:[0-9]*:[0-9]*.*microvm.confidential" && echo "$out" | grep -q "no TEE"; then
  pass "confidential: refused with no TEE, even under unenforceable: run"
else
  fail "confidential: exit $rc: $out"
fi

# 6. The tool's timeout holds inside the guest: 124, the VM gone.
vm_tool vmloop required ""
sed -i 's/limits: { timeout: 30s }/limits: { timeout: 3s }/' "$t/rules/vmloop.yaml"
out=$(run vmloop dash -c 'while :; do :; done')
rc=$?
if [ "$rc" = 124 ] && echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["timed_out"], d'; then
  pass "timeout in the guest: exit 124, timed_out in the report"
else
  fail "timeout: exit $rc: $(echo "$out" | head -c 1500)"
fi

# 7. The exec API of a real `agentd serve` routes the tool into its VM.
#    vmro reads its work directory and may create nothing there: base/minimal's
#    ${home}/.ssh deny (an API task's home is its work directory) names a path
#    absent in the share that the tool cannot bring there.
cat >"$t/rules/vmro.yaml" <<'YAML'
tool: vmro
extends: base/minimal
binaries: [/usr/bin/dash]
files:
  read: ["${workdir}"]
exec:
  allow: [/usr/bin/dash, /usr/bin/cat, /usr/bin/mkdir]
microvm: { mode: required }
limits: { timeout: 30s }
YAML
if out=$("$(dirname "$0")/../support/with_agentd.sh" "$agentd" "$t/rules" 18917 -- \
           "$(dirname "$0")/microvm_api_case.sh" 2>&1); then
  echo "$out" | grep -E "^(exec API in a VM|warm task VM|a grant narrowing|the task.s close|read-only work directory|a grant while)" | while read -r line; do pass "$line"; done
else
  fail "exec API: $out"
fi

# 8. A hostile guest (tests/vm/bad_guest.c as /init) floods the channel, writes
#    garbage, announces a 4 GiB frame or sends a host-only frame: each run ends
#    (126, the reason said) within seconds and takes its VM with it.
if [ -n "${BULWARK_BAD_GUEST_IMAGE:-}" ] && [ -f "$BULWARK_BAD_GUEST_IMAGE/image.json" ]; then
  vm_tool vmbad required ""
  sed -i 's/limits: { timeout: 30s }/limits: { timeout: 30s, output: 256KiB }/' "$t/rules/vmbad.yaml"
  for mode in FLOOD:"more output than the tool's limit" GARBAGE:"broke the channel protocol" \
              OVERSIZE:"broke the channel protocol: frame of" WRONGWAY:"is not accepted from this end"; do
    m=${mode%%:*} want=${mode#*:}
    t0=$(date +%s)
    out=$(BULWARK_GUEST_IMAGE=$BULWARK_BAD_GUEST_IMAGE BULWARK_MICROVM_SNAPSHOTS=off \
          "$agentd" run --rules "$t/rules" --tool vmbad --workdir "$t/wd" -- dash -c "echo MODE-$m" 2>&1)
    rc=$? took=$(( $(date +%s) - t0 ))
    sleep 0.3
    if [ "$rc" = 126 ] && echo "$out" | grep -qF "$want" && [ "$took" -lt 60 ] &&
       ! pgrep -f "qemu-system-x86_64 -M microvm" >/dev/null; then
      pass "hostile guest $m: run ended in ${took} s ($want), VM gone"
    else
      fail "hostile guest $m: exit $rc in ${took} s: $(echo "$out" | head -c 800)"
    fi
  done
  # 9. Root in the guest with every Bulwark layer of the guest gone (the
  #    hostile /init runs instead of the agent): the host file outside the work
  #    directory is still not served (the VMM's view and Landlock on the
  #    host), and no address is reachable (the VM has no network device).
  #    Control: the same path read on the host.
  #    $t/outside is not in the VMM's view at all; /etc/passwd is (the /etc
  #    subset every sandbox gets), and the VMM's Landlock refuses it, recorded.
  for target in "$t/outside/secret.txt" /etc/passwd; do
    out=$(BULWARK_GUEST_IMAGE=$BULWARK_BAD_GUEST_IMAGE BULWARK_MICROVM_SNAPSHOTS=off \
          "$agentd" run --rules "$t/rules" --tool vmbad --workdir "$t/wd" -- dash -c "echo MODE-ESCAPE:$target:" 2>&1)
    if echo "$out" | grep -q "^read $target: " && ! echo "$out" | grep -q "READ\|host secret\|root:x:0" &&
       echo "$out" | grep -q "^connect 10.0.2.2:80: " && ! echo "$out" | grep -q "CONNECTED" &&
       { [ "$target" != /etc/passwd ] || echo "$out" | grep -q "decision: deny landlock file_open /etc/passwd"; }; then
      pass "root in the guest without its layers: $(echo "$out" | grep -E '^(read|connect) ' | tr '\n' ';')"
    else
      fail "root in the guest without its layers ($target): $(echo "$out" | head -c 1500)"
    fi
  done
  [ -r /etc/passwd ] && grep -q "^root:" /etc/passwd && pass "control: the host reads /etc/passwd"
else
  echo "note: no hostile guest image (BULWARK_BAD_GUEST_IMAGE): channel abuse cases not run"
fi

# 10. The guest's network: a tool with network rules gets a virtio-net device on
#     the VMM's user-mode network; its connections are checked twice: by the
#     guest's layers under the tool's rules, then, leaving as the VMM's own, by
#     the host's cgroup socket programs under the same rules. The server is on
#     a non-loopback address of this host (the guest's 127.0.0.1 is its own).
host_ip=$(ip -4 -o addr show scope global 2>/dev/null | awk '{print $4}' | cut -d/ -f1 | head -1)
if [ -n "$host_ip" ]; then
  mkdir -p "$t/www" && echo "served to the VM" > "$t/www/index.txt"
  (cd "$t/www" && exec python3 -m http.server 18490 --bind "$host_ip") >/dev/null 2>&1 & web1=$!
  (cd "$t/www" && exec python3 -m http.server 18491 --bind "$host_ip") >/dev/null 2>&1 & web2=$!
  for _ in $(seq 50); do curl -s -o /dev/null "http://$host_ip:18491/" && break; sleep 0.1; done
  [ "$(curl -s -m 5 "http://$host_ip:18491/index.txt")" = "served to the VM" ] &&
    pass "control: unconfined, the host reaches the port the tool's rules refuse" ||
    fail "control: nothing serves $host_ip:18491"
  net_rules="network:
  connect: [{ cidr: $host_ip/32, ports: [18490], proto: tcp }]"
  cat >"$t/rules/vmnet.yaml" <<YAML
tool: vmnet
extends: [base/network-client, base/curl-runtime]
binaries: [/usr/bin/curl]
files: { read: ["\${workdir}"], write: ["\${workdir}"], create: ["\${workdir}"] }
exec: { allow: [/usr/bin/curl] }
$net_rules
syscalls: { deny: [bind] }
microvm: { mode: required }
limits: { timeout: 60s, pids: 8 }
YAML
  out=$(run vmnet curl -sS -m 20 "http://$host_ip:18490/index.txt")
  if echo "$out" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["stdout"]["data"] == "served to the VM\n", d["stdout"]
assert "10.0.2.15" in d["microvm"]["guest"]["network"], d["microvm"]["guest"]
'; then pass "a tool in the VM reaches its allowed address through the VMM's user-mode network"
  else fail "guest network: $(echo "$out" | head -c 2000) $(head -c 1000 "$t/err")"; fi
  out=$("$agentd" run --rules "$t/rules" --tool vmnet --workdir "$t/wd" -- curl -sS -m 20 "http://$host_ip:18491/" 2>&1)
  rc=$?
  # Refused in the guest (its Landlock port rule acts first; the 6.12 guest's
  # Landlock cannot log, ABI 6): the connection never leaves the VM, so the
  # host has nothing to judge.
  if [ "$rc" = 7 ] && echo "$out" | grep -q "Couldn't connect" && ! echo "$out" | grep -q "^decision: .*:18491"; then
    pass "a port the rules do not allow: refused in the guest (exit $rc), never reaching the host"
  else
    fail "guest network, refused port: exit $rc: $(echo "$out" | grep -v 'bpf: lsm' | head -c 1500)"
  fi
  if [ -n "${BULWARK_BAD_GUEST_IMAGE:-}" ] && [ -f "$BULWARK_BAD_GUEST_IMAGE/image.json" ]; then
    # Root in the guest with no Bulwark layer brings the device up itself: the
    # allowed port connects (the network works), the other is refused on the
    # host by the VMM's layers under the tool's rules (its Landlock port rule,
    # then the cgroup programs), recorded.
    vm_tool vmbadnet required "$net_rules"
    out=$(BULWARK_GUEST_IMAGE=$BULWARK_BAD_GUEST_IMAGE BULWARK_MICROVM_SNAPSHOTS=off \
          "$agentd" run --rules "$t/rules" --tool vmbadnet --workdir "$t/wd" -- \
          dash -c "echo MODE-NETESCAPE:$host_ip:18490:18491:" 2>&1)
    if echo "$out" | grep -q "^connect $host_ip:18490: CONNECTED" &&
       echo "$out" | grep -q "^connect $host_ip:18491: " && ! echo "$out" | grep -q "18491: CONNECTED" &&
       echo "$out" | grep -qE "^decision: deny (landlock|sock_addr) connect tcp $host_ip:18491"; then
      pass "root in the guest without its layers: $(echo "$out" | grep -E '^connect ' | tr '\n' ';') the host's check refused it"
    else
      fail "guest network without the guest's layers: $(echo "$out" | grep -v 'bpf: lsm' | head -c 2000)"
    fi
  fi
  kill "$web1" "$web2" 2>/dev/null
else
  echo "note: no global IPv4 address on this host: the guest network cases not run"
fi

# 10b. Names in the VM: the guest's resolver is qemu's DNS forwarder
#      (10.0.2.3), which sends each query on to the host's resolver (the first
#      of /etc/resolv.conf) as the VMM's own. A query is judged twice: in the
#      guest at the forwarder, under the tool's network.dns rules rewritten to
#      it, then on the host at the resolver, under the same rules as written.
#      In a network namespace of its own, where a test responder serves the
#      host resolver's address (the host's real resolver is left alone).
resolver=$(awk '/^nameserver/ {print $2; exit}' /etc/resolv.conf)
if [ -n "$resolver" ] && [ "${resolver#*:}" = "$resolver" ] && command -v unshare >/dev/null; then
  mkdir -p "$t/www2" && echo "served by name" > "$t/www2/index.txt"
  for name in vmdns vmotherdns; do
    cat >"$t/rules/$name.yaml" <<YAML
tool: $name
extends: [base/network-client, base/curl-runtime]
binaries: [/usr/bin/curl]
files: { read: ["\${workdir}"], write: ["\${workdir}"], create: ["\${workdir}"] }
exec: { allow: [/usr/bin/curl] }
network:
  connect: [{ cidr: 192.0.2.10/32, ports: [18492], proto: tcp }]
$([ "$name" = vmdns ] && echo "  dns: [$resolver]")
syscalls: { deny: [bind] }
microvm: { mode: required }
limits: { timeout: 60s, pids: 8 }
YAML
  done
  cat >"$t/netns.sh" <<'SH'
# In a fresh network namespace: the resolver's address and 192.0.2.10 on
# its loopback device, the responder and a web server on them, then the
# command.
set -u
ip link set lo up || exit 90
case $RESOLVER in 127.*) ;; *) ip addr add "$RESOLVER/32" dev lo || exit 90 ;; esac
ip addr add 192.0.2.10/32 dev lo || exit 90
python3 "$RESPONDER" "$RESOLVER" "$T/dns.log" files.test=192.0.2.10 >"$T/dns.out" 2>&1 & dns=$!
(cd "$T/www2" && exec python3 -m http.server 18492 --bind 192.0.2.10) >/dev/null 2>&1 & web=$!
for _ in $(seq 50); do grep -q ready "$T/dns.out" && curl -s -o /dev/null http://192.0.2.10:18492/ && break; sleep 0.1; done
"$@"
rc=$?
kill "$dns" "$web" 2>/dev/null
exit $rc
SH
  in_netns() { T=$t RESOLVER=$resolver RESPONDER=$(dirname "$0")/dns_responder.py unshare -n bash "$t/netns.sh" "$@"; }
  : >"$t/dns.log"
  if [ "$(in_netns getent ahostsv4 files.test | awk 'NR==1 {print $1}')" = 192.0.2.10 ]; then
    pass "control: unconfined, the test resolver at $resolver answers files.test"
  else
    fail "control: the test resolver at $resolver did not answer: $(cat "$t/dns.out")"
  fi
  : >"$t/dns.log"
  out=$(in_netns "$agentd" run --rules "$t/rules" --tool vmdns --workdir "$t/wd" --json -- \
        curl -sS -m 20 http://files.test:18492/index.txt 2>"$t/err")
  if echo "$out" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["stdout"]["data"] == "served by name\n", (d["stdout"], d["stderr"])
assert d["microvm"]["guest"]["dns"].startswith("10.0.2.3 "), d["microvm"]["guest"]
' && grep -q "^files.test 1$" "$t/dns.log"; then
    pass "a tool in the VM resolves a name through qemu's forwarder to the host's resolver its rules allow"
  else
    fail "guest DNS: $(echo "$out" | head -c 2500) $(head -c 1000 "$t/err") log: $(cat "$t/dns.log")"
  fi
  if [ "${resolver#127.}" = "$resolver" ]; then
    # Rules that name only another resolver (base/network-client's 127.0.0.53):
    # the query passes the guest's check at the forwarder, and the host's
    # check refuses the VMM's at the resolver it goes on to.
    : >"$t/dns.log"
    out=$(in_netns "$agentd" run --rules "$t/rules" --tool vmotherdns --workdir "$t/wd" -- \
          curl -sS -m 20 http://files.test:18492/index.txt 2>&1)
    rc=$?
    if [ "$rc" = 6 ] && echo "$out" | grep -qE "^decision: deny [a-z_]+ (connect|sendmsg) udp $resolver:53" &&
       ! grep -q files.test "$t/dns.log"; then
      pass "rules naming another resolver: the query passes the guest's forwarder, refused on the host at $resolver (exit $rc)"
    else
      fail "guest DNS, other resolver: exit $rc: $(echo "$out" | grep -v 'bpf: lsm' | head -c 2000) log: $(cat "$t/dns.log")"
    fi
  fi
else
  echo "note: no IPv4 resolver in /etc/resolv.conf or no unshare: the guest DNS cases not run"
fi

# 11. The escape battery inside the guest: each attempt made by the tool under
#     its guest layers fails; the control, the same attempt by root in the
#     guest with no Bulwark layer (the hostile /init, chrooted into the same 9p
#     view), succeeds, so it is the guest's layers that stop it.
# (not those a chroot itself refuses to root: user namespaces; nor those the
# bare 9p view lacks the objects for)
attempts="clone_newns,chroot,bpf_map_create,ptrace_child,process_vm_readv,kcmp,perf_event_open,userfaultfd,add_key,keyctl,setuid_root,capset_sys_admin,clock_settime"
if [ -n "$probe" ] && [ -x "$probe" ] && [ -n "${BULWARK_BAD_GUEST_IMAGE:-}" ] && [ -f "$BULWARK_BAD_GUEST_IMAGE/image.json" ]; then
  probe_yaml="binaries: [/usr/bin/dash]
files: { read: [\"\${workdir}\", \"$probe\"] }
exec: { allow: [/usr/bin/dash, \"$probe\"] }
microvm: { mode: required }
limits: { timeout: 60s }"
  printf 'tool: vmprobe\nextends: base/minimal\n%s\n' "$probe_yaml" >"$t/rules/vmprobe.yaml"
  confined=$("$agentd" run --rules "$t/rules" --tool vmprobe --workdir "$t/wd" -- \
             dash -c "for a in $(echo "$attempts" | tr , ' '); do o=\$($probe \$a 2>&1); rc=\$?
                      [ \$rc -gt 128 ] && o=\"DENIED killed by signal \$((rc - 128))\"; echo \"\$a: \$o\"; done" 2>/dev/null)
  control=$(BULWARK_GUEST_IMAGE=$BULWARK_BAD_GUEST_IMAGE BULWARK_MICROVM_SNAPSHOTS=off \
            "$agentd" run --rules "$t/rules" --tool vmprobe --workdir "$t/wd" -- dash -c "echo MODE-PROBE:$probe:$attempts:" 2>/dev/null)
  bad=0
  for a in $(echo "$attempts" | tr , ' '); do
    c=$(echo "$confined" | grep "^$a: " | head -1) k=$(echo "$control" | grep "^$a: " | head -1)
    if [[ "$c" == "$a: DENIED"* ]] && [[ "$k" == "$a: OK"* ]]; then :; else
      bad=1
      fail "escape in the guest, $a: under the guest's layers [$c], root in the guest without them [$k]"
    fi
  done
  [ "$bad" = 0 ] && pass "escape battery in the guest: $(echo "$attempts" | tr , ' ' | wc -w) attempts refused by the guest's layers, each succeeding for root in the guest without them"
else
  echo "note: no escape probe or hostile guest image: the escape battery in the guest not run"
fi

# Nothing left behind: no VMM process, no run cgroup.
sleep 0.5
pgrep -f "qemu-system-x86_64 -M microvm" >/dev/null && fail "a VMM process is left" || pass "no VMM process left"
echo "microvm: $fails failure(s)"
[ "$fails" = 0 ]
