# Unknown keys and syscalls: exact diagnostic text, exit 1.
. "$CLI_LIB"
for name in typo syscall-typo arch-typo; do
    run check "$FIXTURES/$name.yaml"
    expect_rc 1
    sed "s|FIXTURES|$FIXTURES|" "$FIXTURES/$name.expected" > "$WORK/expected"
    expect_err_golden "$WORK/expected"
    expect_out_contains "$name.yaml: 1 error(s)"
done
