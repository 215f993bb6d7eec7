# --json: one object per file with structured diagnostics.
. "$CLI_LIB"
run check --json "$FIXTURES/typo.yaml"
expect_rc 1
expect_out_contains '"code": "unknown-key"'
expect_out_contains '"line": 6'
expect_out_contains '"ok": false'
