# extends resolves against --rules-dir; errors point into the base file.
. "$CLI_LIB"
run check --rules-dir "$FIXTURES" "$FIXTURES/child.yaml"
expect_rc 1
expect_err_contains "$FIXTURES/base/bad.yaml:1:10: error: unknown key \"raed\" in \"files\""
run check --rules-dir "$WORK" "$FIXTURES/child.yaml"
expect_rc 1
expect_err_contains "no rule file \"base/bad.yaml\""
