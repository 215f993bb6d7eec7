# compile -> bundle JSON -> explain and diff, from rule files and bundles.
. "$CLI_LIB"
skip_without_seccomp
run check "$FIXTURES/curl.yaml"
expect_rc 0
expect_out_contains "curl.yaml: ok"
run compile "$FIXTURES/curl.yaml" -o "$WORK/curl.json"
expect_rc 0
expect_out_contains "sha256:"
run explain "$WORK/curl.json"
expect_rc 0
expect_out_contains "files (BPF LSM, Landlock): everything not listed is denied"
expect_out_contains "gap: Landlock cannot deny by address"
expect_out_contains "syscalls (seccomp)"
run explain --json "$FIXTURES/curl.yaml"
expect_rc 0
expect_out_contains '"landlock_gaps"'
run diff "$FIXTURES/curl.yaml" "$WORK/curl.json"
expect_rc 0
expect_out_contains "no semantic differences"
run diff "$FIXTURES/curl.yaml" "$FIXTURES/curl-v2.yaml"
expect_rc 1
expect_out_contains "~ limits memory: 256MiB -> 512MiB"
expect_out_contains "- network allow connect tcp 10.20.0.0/16 port 80"
sed -i 's/"allow": 1,/"allow": 31,/' "$WORK/curl.json"
run explain "$WORK/curl.json"
expect_rc 2
expect_err_contains "hash mismatch"
