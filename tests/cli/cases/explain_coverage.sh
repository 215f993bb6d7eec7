# Per-rule coverage in `policyc explain`: every rule with the layers that can
# hold it; with --layers, which of them hold it on that host, exit 1 when a
# rule (not marked unenforceable: run) is held by none.
. "$CLI_LIB"
skip_without_seccomp
all=landlock,mount,seccomp,sock_addr,sock_unix,netns,cgroup,rlimit,supervisor
run explain --layers "$all" "$FIXTURES/coverage.yaml"
expect_rc 0
sed "s|FIXTURES|$FIXTURES|g" "$FIXTURES/coverage.expected" > "$WORK/expected"
diff -u "$WORK/expected" "$WORK/out" >&2 || fail "stdout differs from coverage.expected"

# Without the mount layer nothing holds the deny below ${workdir}; the one
# marked unenforceable: run is reported, not refused.
run explain --layers landlock,seccomp,sock_addr,sock_unix,netns,cgroup,rlimit,supervisor "$FIXTURES/coverage.yaml"
expect_rc 1
expect_out_contains "files.deny: \${workdir}/secret"
expect_out_contains "NOT HELD HERE: agentd refuses to start the tool"
expect_out_contains "NOT HELD HERE (unenforceable: run: the tool starts anyway)"
expect_out_contains "2 rule(s) held by no layer in force here (1 marked unenforceable: run)"
[ "$(grep -c 'NOT HELD HERE' "$WORK/out")" -eq 2 ] || fail "expected two rules held by nothing"

# Without the cgroup unix programs (before Linux 6.7) and the BPF LSM,
# nothing refuses a connect to a unix socket under a granted path.
run explain --layers landlock,mount,seccomp,sock_addr,netns,cgroup,rlimit,supervisor "$FIXTURES/coverage.yaml"
expect_rc 1
expect_out_contains "network.unix: a connect or addressed send to a unix socket no rule names is refused"
expect_out_contains "1 rule(s) held by no layer in force here"
# ... and with the BPF LSM alone (its socket hooks judge unix addresses), it is held.
run explain --layers bpf_lsm,landlock,mount,seccomp,sock_addr,netns,cgroup,rlimit,supervisor "$FIXTURES/coverage.yaml"
expect_rc 0

# The plain explain lists every rule's layers too.
run explain "$FIXTURES/coverage.yaml"
expect_rc 0
expect_out_contains "rules and the layers that hold each one"
expect_out_contains "bpf_lsm (object walk at every access) | mount (an inaccessible mount over it at launch"

# JSON: the same rows, with held_here_by.
run explain --json --layers "$all" "$FIXTURES/coverage.yaml"
expect_rc 0
expect_out_contains '"held_here_by"'

run explain --layers landlock,bogus "$FIXTURES/coverage.yaml"
expect_rc 2
expect_err_contains 'unknown layer "bogus"'
echo "explain_coverage: ok"

# Unix binds: the fixture refuses bind(2) (seccomp holds both bind defaults);
# without seccomp the abstract one (a host-netns tool) has only the BPF LSM.
run explain --layers landlock,mount,sock_addr,sock_unix,netns,cgroup,rlimit,supervisor "$FIXTURES/coverage.yaml"
expect_rc 1
expect_out_contains "binding an abstract unix name no bind rule names is refused"
grep -A2 "binding a pathname unix socket no bind rule names" "$WORK/out" | grep -qx "      held here by: landlock" ||
    fail "the pathname bind default is not held by Landlock alone without seccomp"
grep -A2 "binding an abstract unix name" "$WORK/out" | grep -q "NOT HELD HERE" ||
    fail "the abstract bind default of a host-netns tool is held without the BPF LSM or seccomp"
