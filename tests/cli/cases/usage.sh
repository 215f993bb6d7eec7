# Subcommands are listed; unknown ones are usage errors.
. "$CLI_LIB"
run --help
expect_rc 0
for c in check compile explain diff; do expect_out_contains "$c"; done
run frobnicate
expect_rc 2
run --version
expect_rc 0
expect_out_contains "bulwark"
