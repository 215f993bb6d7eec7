# Bad input never passes: BOM, NUL, invalid UTF-8, empty, missing, huge.
. "$CLI_LIB"
printf '\xef\xbb\xbftool: x\n' > "$WORK/bom.yaml"
printf 'tool: x\0\n' > "$WORK/nul.yaml"
printf 'tool: x\ndescription: \xff\n' > "$WORK/utf8.yaml"
: > "$WORK/empty.yaml"
head -c 5000000 /dev/zero | tr '\0' 'a' > "$WORK/huge.yaml"
for f in bom nul utf8 empty huge; do
    run check "$WORK/$f.yaml"
    expect_rc 1
done
run check "$WORK/bom.yaml"
expect_err_contains "byte order mark"
run check "$WORK/huge.yaml"
expect_err_contains "the limit is 4194304 bytes"
run check "$WORK/does-not-exist.yaml"
expect_rc 1
expect_err_contains "cannot open"
