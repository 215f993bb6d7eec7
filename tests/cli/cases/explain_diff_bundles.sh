# explain and diff on compiled bundles (fixtures/*.bundle.json, compiled from
# curl.yaml and curl-v2.yaml): readable sections, semantic changes only,
# tampered bundles refused.
. "$CLI_LIB"
B="$FIXTURES/curl.bundle.json"
B2="$FIXTURES/curl-v2.bundle.json"
run explain "$B"
expect_rc 0
expect_out_contains "policy curl (enforce)"
expect_out_contains "files (BPF LSM, Landlock): everything not listed is denied"
expect_out_contains "\${home}/.ssh"
expect_out_contains "allow connect tcp 10.20.0.0/16 port 80"
expect_out_contains "deny connect+bind+send tcp+udp 169.254.169.254/32 all ports"
expect_out_contains "syscalls (seccomp)"
expect_out_contains "memory      256MiB"
expect_out_contains "gap: Landlock cannot deny by address"
run explain --json "$B"
expect_rc 0
expect_out_contains '"landlock_gaps"'
expect_out_contains '"syscalls": ['
run diff "$B" "$B"
expect_rc 0
expect_out_contains "no semantic differences"
run diff "$B" "$B2"
expect_rc 1
expect_out_contains "~ limits memory: 256MiB -> 512MiB"
expect_out_contains "- network allow connect tcp 10.20.0.0/16 port 80"
run diff --json "$B" "$B2"
expect_rc 1
expect_out_contains '"change": "changed"'
sed 's/"allow": 1,/"allow": 31,/' "$B" > "$WORK/tampered.json"
run explain "$WORK/tampered.json"
expect_rc 2
expect_err_contains "hash mismatch"
echo '{"format": 1}' > "$WORK/short.json"
run diff "$B" "$WORK/short.json"
expect_rc 2
expect_err_contains "malformed bundle"
