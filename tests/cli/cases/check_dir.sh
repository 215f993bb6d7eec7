# `policyc check DIR` checks every rule file below DIR (recursively, sorted,
# extends resolved in DIR) and says what it left out; a path that is neither
# a file nor a directory is named for what it is.
. "$CLI_LIB"
skip_without_seccomp
RULES=$(cd "$FIXTURES/../../../rules" && pwd)

d=$WORK/rules
mkdir -p "$d/base" "$d/tests" "$d/sub" "$d/.git" "$d/empty"
cat > "$d/base/floor.yaml" <<'EOF'
tool: base-floor
description: the floor
files:
  read: [/usr/lib]
EOF
cat > "$d/tool.yaml" <<'EOF'
tool: tool
description: extends a base found in the directory checked
extends: base/floor
binaries: [/usr/bin/cat]
exec:
  allow: [/usr/bin/cat]
EOF
printf '{"tool": "jtool", "description": "a rule file in JSON", "binaries": ["/usr/bin/cat"]}\n' > "$d/jtool.json"
printf '{"defaultAction": "SCMP_ACT_ERRNO", "syscalls": []}\n' > "$d/profile.json"
printf 'tool: tool\ncases: []\n' > "$d/tests/tool.test.yaml"
printf 'this is not a rule file\n' > "$d/README.md"
printf 'tool: hidden\nraed: [/]\n' > "$d/.git/bad.yaml"
printf 'tool: b\nfiles:\n  raed: [/etc]\n' > "$d/sub/b.yml"

run check "$d"
expect_rc 1
# Every rule file, in path order; the bad one is named with its error.
printf '%s\n' "$d/base/floor.yaml: ok" "$d/jtool.json: ok" "$d/sub/b.yml: 1 error(s)" "$d/tool.yaml: ok" \
    > "$WORK/expected"
grep -E '^/.*: (ok|[0-9]+ error)' "$WORK/out" | sed -E 's/, [0-9]+ warning\(s\)$//' > "$WORK/got"
diff -u "$WORK/expected" "$WORK/got" >&2 || fail "rule files checked, or their order"
expect_err_contains "$d/sub/b.yml:3:3: error: unknown key \"raed\" in \"files\""
# What was left out is said, not silently dropped.
expect_out_contains "$d/profile.json: skipped: not a rule file (no \"tool\" key"
expect_out_contains "$d: 4 rule files; 1 policy test not checked here (\`policyc test\` runs them); 1 other file ignored"
grep -q "hidden" "$WORK/out" "$WORK/err" && fail "a hidden directory was read"

# A rule file that is a dangling link is named, not skipped.
ln -s "$d/no-such-target.yaml" "$d/sub/dangling.yaml"
run check "$d"
expect_rc 1
expect_err_contains "cannot open $d/sub/dangling.yaml: no such file or directory"
rm "$d/sub/dangling.yaml"

# Control: without the bad file, the directory checks clean (exit 0).
rm "$d/sub/b.yml"
run check "$d"
expect_rc 0
expect_out_contains "$d/tool.yaml: ok"

# extends resolves in the directory checked: a base that extends another
# base (rules/base/*.yaml extend base/minimal) checks too. The shipped rules
# checked as a directory are exactly rules/*.yaml, rules/base/*.yaml and rules/vmm/*.yaml (the microVM tier's VMM).
run check "$RULES/"
expect_rc 0
ls "$RULES"/*.yaml "$RULES"/base/*.yaml "$RULES"/vmm/*.yaml | sed 's|$|: ok|' | LC_ALL=C sort > "$WORK/expected"
grep -E ': ok(, [0-9]+ warning\(s\))?$' "$WORK/out" | sed -E 's/, [0-9]+ warning\(s\)$//' > "$WORK/got"
diff -u "$WORK/expected" "$WORK/got" >&2 || fail "policyc check rules/ is not every shipped rule file"
expect_out_contains "policy tests not checked here"
grep -q "$RULES//" "$WORK/err" && fail "a trailing slash doubles in the paths of diagnostics"

# A directory with no rule file is an error, never an empty success.
run check "$d/empty"
expect_rc 1
expect_err_contains "$d/empty: no rule files (*.yaml, *.yml, *.json) below this directory"

# Neither a file nor a directory: named for what it is, and nothing hangs.
mkfifo "$WORK/fifo.yaml"
run check "$WORK/fifo.yaml"
expect_rc 1
expect_err_contains "$WORK/fifo.yaml is not a regular file (a FIFO)"
run check "$WORK/no-such-dir"
expect_rc 1
expect_err_contains "cannot open $WORK/no-such-dir: no such file or directory"

# Commands that take one rule file say a directory is not one.
for c in compile explain; do
    run $c "$d"
    expect_rc 1
    expect_err_contains "$d is a directory, not a rule file"
    grep -q "9223372036854775807" "$WORK/err" && fail "$c reads a directory as a file"
done

# policyc test takes a directory of policy test files too.
run test --rules-dir "$RULES" "$RULES/tests"
expect_rc 0
n=$(ls "$RULES"/tests/*.test.yaml | wc -l)
expect_out_contains "$RULES/tests: $n policy test files"
# One summary line per test file, each file of the directory, in path order.
ls "$RULES"/tests/*.test.yaml | LC_ALL=C sort > "$WORK/expected"
grep -E '^/.*\.test\.yaml: [0-9]+ passed, 0 failed$' "$WORK/out" | sed -E 's/: [0-9]+ passed.*//; s|//*|/|g' > "$WORK/got"
diff -u "$WORK/expected" "$WORK/got" >&2 || fail "policyc test rules/tests did not run every test file"
run test "$d/empty"
expect_rc 2
expect_err_contains "$d/empty: no policy test files (*.test.yaml) below this directory"
exit 0
