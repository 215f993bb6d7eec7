# syscalls.architectures: native only by default; an explicit opt-in for
# i386 shown by explain, diff and the bundle; every bad value is an error at
# its file:line:col; extends takes the union.
. "$CLI_LIB"
skip_without_seccomp
mkdir -p "$WORK/base"
printf 'tool: probe\n' > "$WORK/native.yaml"
printf 'tool: probe\nsyscalls:\n  architectures: [native, i386]\n' > "$WORK/i386.yaml"

run explain "$WORK/native.yaml"
expect_rc 0
expect_out_contains "architectures: native; calls through i386, x32 are refused (the violation action; deny rules keep theirs)"
run explain "$WORK/i386.yaml"
expect_rc 0
expect_out_contains "architectures: native, i386 ($WORK/i386.yaml:3); calls through x32 are refused"
run compile "$WORK/native.yaml" -o "$WORK/native.json"
expect_rc 0
field() { python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(json.dumps(eval(sys.argv[2], {"j": j})))' "$@"; }
[ "$(field "$WORK/native.json" 'j["seccomp"]["arches"]')" = "[3221225534]" ] || fail "native bundle accepts more than x86_64"
[ "$(field "$WORK/native.json" 'j["syscalls"]["architectures"]')" = "[]" ] || fail "native bundle lacks syscalls.architectures"
run compile "$WORK/i386.yaml" -o "$WORK/i386.json"
expect_rc 0
[ "$(field "$WORK/i386.json" 'j["seccomp"]["arches"]')" = "[3221225534, 1073741827]" ] || fail "i386 bundle does not accept i386"
[ "$(field "$WORK/i386.json" '[a[0] for a in j["syscalls"]["architectures"]]')" = '["native", "i386"]' ] ||
    fail "i386 bundle lacks syscalls.architectures"
run explain "$WORK/i386.json"
expect_rc 0
expect_out_contains "architectures: native, i386"

run diff "$WORK/native.yaml" "$WORK/i386.yaml"
expect_rc 1
expect_out_contains "~ syscalls architectures: native -> native, i386"
run diff "$WORK/native.json" "$WORK/i386.json"
expect_rc 1
expect_out_contains "~ syscalls architectures: native -> native, i386"
# Written out, the default is the same policy.
printf 'tool: probe\nsyscalls:\n  architectures: [native]\n' > "$WORK/explicit.yaml"
run diff "$WORK/native.yaml" "$WORK/explicit.yaml"
expect_rc 0
expect_out_contains "no semantic differences"

# Bad values: file:line:col and a hint; never a bundle.
printf 'tool: probe\nsyscalls:\n  architectures: [i386]\n' > "$WORK/no-native.yaml"
run compile "$WORK/no-native.yaml" -o "$WORK/no-native.json"
expect_rc 1
expect_err_contains "$WORK/no-native.yaml:3:18: error: \"syscalls.architectures\" does not list native"
expect_err_contains "hint: list every ABI the filter accepts, the host's own first: architectures: [native, i386]"
[ ! -e "$WORK/no-native.json" ] || fail "a bundle was written for a file with errors"
printf 'tool: probe\nsyscalls:\n  architectures: [native, x32]\n' > "$WORK/x32.yaml"
run check "$WORK/x32.yaml"
expect_rc 1
expect_err_contains "$WORK/x32.yaml:3:27: error: x32 system calls are always refused"
printf 'tool: probe\nsyscalls:\n  architectures: [native, amd64]\n' > "$WORK/amd64.yaml"
run check "$WORK/amd64.yaml"
expect_rc 1
expect_err_contains "$WORK/amd64.yaml:3:27: error: unknown architecture \"amd64\""
expect_err_contains "hint: the host's own ABI is written \"native\""
printf 'tool: probe\nsyscalls:\n  architectures: []\n' > "$WORK/empty.yaml"
run check "$WORK/empty.yaml"
expect_rc 1
expect_err_contains "$WORK/empty.yaml:3:18: error: \"syscalls.architectures\" is empty"
printf 'tool: probe\nsyscalls:\n  architectures: native\n' > "$WORK/scalar.yaml"
run check "$WORK/scalar.yaml"
expect_rc 1
expect_err_contains "$WORK/scalar.yaml:3:18: error: \"syscalls.architectures\" must be a list of ABI names"
expect_err_contains "hint: write a list: architectures: [native]"
printf 'tool: probe\nsyscalls:\n  architectures: [native, [i386]]\n' > "$WORK/nested.yaml"
run check "$WORK/nested.yaml"
expect_rc 1
expect_err_contains "$WORK/nested.yaml:3:27: error: \"syscalls.architectures entry\" must be a single value"
printf 'tool: probe\nsyscalls:\n  architectures: [native, native]\n' > "$WORK/dup.yaml"
run check --werror "$WORK/dup.yaml"
expect_rc 1
expect_err_contains "$WORK/dup.yaml:3:27: error: \"native\" is already listed by"
printf 'tool: probe\nsyscalls:\n  architectures: [native, arm]\n' > "$WORK/arm.yaml"
run check --werror "$WORK/arm.yaml"
expect_rc 1
expect_err_contains "$WORK/arm.yaml:3:27: error: \"arm\" is not an ABI this host's kernel runs: the entry has no effect here"

# extends: a union. A base's accepted ABI stays; a child may add one, and
# a base's native satisfies the child's list.
printf 'tool: base-i386\nsyscalls:\n  architectures: [native, i386]\n' > "$WORK/base/i386.yaml"
printf 'tool: child\nextends: base/i386\n' > "$WORK/child.yaml"
run explain --rules-dir "$WORK" "$WORK/child.yaml"
expect_rc 0
expect_out_contains "architectures: native, i386 ($WORK/base/i386.yaml:3)"
printf 'tool: base-native\nsyscalls:\n  architectures: [native]\n' > "$WORK/base/native.yaml"
printf 'tool: child\nextends: base/native\nsyscalls:\n  architectures: [i386]\n' > "$WORK/child2.yaml"
run check --werror --rules-dir "$WORK" "$WORK/child2.yaml"
expect_rc 0
run explain --rules-dir "$WORK" "$WORK/child2.yaml"
expect_out_contains "architectures: native, i386 ($WORK/child2.yaml:4)"
printf 'tool: child\nextends: base/i386\nsyscalls:\n  architectures: [native]\n' > "$WORK/child3.yaml"
run explain --rules-dir "$WORK" "$WORK/child3.yaml"
expect_out_contains "architectures: native, i386"
