# Helpers for tests/cli/cases/*.sh. run ARGS... sets $rc, $out, $err.
set -u
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
run() {
    "$POLICYC" "$@" >"$WORK/out" 2>"$WORK/err"
    rc=$?
    out=$(cat "$WORK/out")
    err=$(cat "$WORK/err")
}
fail() {
    echo "FAIL: $*" >&2
    echo "--- stdout" >&2; echo "$out" >&2
    echo "--- stderr" >&2; echo "$err" >&2
    exit 1
}
expect_rc() { [ "$rc" -eq "$1" ] || fail "exit code $rc, expected $1"; }
expect_out_contains() { grep -qF -- "$1" "$WORK/out" || fail "stdout lacks: $1"; }
expect_err_contains() { grep -qF -- "$1" "$WORK/err" || fail "stderr lacks: $1"; }
expect_err_golden() { diff -u "$1" "$WORK/err" >&2 || fail "stderr differs from $1"; }
# Cases that need a working compile skip while the seccomp emitter is absent.
skip_without_seccomp() {
    "$POLICYC" check "$FIXTURES/curl.yaml" >/dev/null 2>"$WORK/probe"
    if grep -qF "seccomp emitter not built" "$WORK/probe"; then
        echo "SKIP: seccomp emitter not built in this tree"
        exit 77
    fi
}
