#include <catch2/catch.hpp>

#include "policy_fixtures.h"

using namespace bulwark::test;

TEST_CASE("operation paths fold separators, dots and parent links", "[match]") {
    CHECK(*resolve_operation_path("/") == "/");
    CHECK(*resolve_operation_path("//etc//ssl/./certs/") == "/etc/ssl/certs");
    CHECK(*resolve_operation_path("/a/b/../c") == "/a/c");
    CHECK(*resolve_operation_path("/../../etc") == "/etc");
    CHECK_FALSE(resolve_operation_path("etc/passwd"));
    CHECK_FALSE(resolve_operation_path(""));
}

TEST_CASE("a rule covers whole components only", "[match]") {
    CHECK(path_covers("/a/b", "/a/b"));
    CHECK(path_covers("/a/b", "/a/b/c"));
    CHECK_FALSE(path_covers("/a/b", "/a/bc"));
    CHECK_FALSE(path_covers("/a/b", "/a"));
    CHECK(path_covers("/", "/anything"));
}

TEST_CASE("file rights are the union of covering allows minus covering denies", "[evaluator]") {
    BundleBuilder bb;
    bb.allow("/srv/t1", BW_FS_READ | BW_FS_WRITE | BW_FS_CREATE)
        .allow("/srv/t1/sub", BW_FS_REMOVE)
        .deny("/srv/t1/.git/hooks", BW_FS_WRITE | BW_FS_CREATE)
        .allow("/usr/bin/curl", BW_FS_EXEC | BW_FS_READ);
    Bundle b = bb.build();

    auto d = evaluate(b, open_op("/srv/t1/x.txt"));
    CHECK(d.verdict == Verdict::Allow);
    CHECK(d.rule_id == 0);
    CHECK(d.layer == BW_LAYER_BPF_LSM);

    // union: remove comes from the deeper rule, read from the shallower one
    CHECK(evaluate(b, file_op(OpKind::Remove, "/srv/t1/sub/f")).verdict == Verdict::Allow);
    CHECK(evaluate(b, file_op(OpKind::Remove, "/srv/t1/sub/f")).rule_id == 1);
    CHECK(evaluate(b, open_op("/srv/t1/sub/f")).rule_id == 0);
    CHECK(evaluate(b, file_op(OpKind::Remove, "/srv/t1/f")).verdict == Verdict::Deny);

    // deny overrides, only for the rights it names
    d = evaluate(b, open_op("/srv/t1/.git/hooks/pre-commit", FileAccess::Write));
    CHECK(d.verdict == Verdict::Deny);
    CHECK(d.rule_id == 2);
    CHECK_THAT(d.explanation, Catch::Contains("rules/t.yaml:3:5 files.deny: /srv/t1/.git/hooks"));
    CHECK(evaluate(b, open_op("/srv/t1/.git/hooks/pre-commit")).verdict == Verdict::Allow);

    // component boundaries
    CHECK(evaluate(b, open_op("/srv/t10/x")).verdict == Verdict::Deny);
    CHECK(evaluate(b, open_op("/srv/t1/../t10/x")).verdict == Verdict::Deny);
    CHECK(evaluate(b, open_op("/srv//t1/./x")).verdict == Verdict::Allow);

    // uncovered is denied once file rules exist, with a hint
    d = evaluate(b, open_op("/etc/passwd"));
    CHECK(d.verdict == Verdict::Deny);
    CHECK(d.rule_id == BW_NO_RULE);
    CHECK_THAT(d.explanation, Catch::Contains("files.read on a path covering /etc/passwd"));

    // exec needs the exec right; a covering rule granting other rights is named
    CHECK(evaluate(b, file_op(OpKind::Exec, "/usr/bin/curl")).verdict == Verdict::Allow);
    d = evaluate(b, file_op(OpKind::Exec, "/srv/t1/run.sh"));
    CHECK(d.verdict == Verdict::Deny);
    CHECK_THAT(d.explanation, Catch::Contains("grant only read|write|create"));
    CHECK_THAT(d.explanation, Catch::Contains("exec.allow"));

    CHECK(evaluate(b, open_op("relative/path")).verdict == Verdict::Deny);
}

TEST_CASE("without files rules file access is unrestricted; exec: alone restricts exec only",
          "[evaluator]") {
    Bundle none = BundleBuilder{}.build();
    CHECK(evaluate(none, open_op("/etc/shadow")).verdict == Verdict::Allow);
    CHECK(evaluate(none, file_op(OpKind::Exec, "/bin/sh")).verdict == Verdict::Allow);
    CHECK(evaluate(none, open_op("/etc/shadow")).rule_id == BW_NO_RULE);

    BundleBuilder eb;
    eb.allow("/usr/bin/git", BW_FS_EXEC, "exec");
    Bundle exec_only = eb.build();
    CHECK(exec_only.bpf.header.flags & BW_POL_EXEC_ENFORCED);
    CHECK_FALSE(exec_only.bpf.header.flags & BW_POL_FILES_ENFORCED);
    CHECK(evaluate(exec_only, file_op(OpKind::Exec, "/usr/bin/git")).verdict == Verdict::Allow);
    CHECK(evaluate(exec_only, file_op(OpKind::Exec, "/bin/sh")).verdict == Verdict::Deny);
    CHECK(evaluate(exec_only, open_op("/bin/sh")).verdict == Verdict::Allow);
    CHECK(evaluate(exec_only, open_op("/srv/x", FileAccess::Write)).verdict == Verdict::Allow);
}

TEST_CASE("audit mode turns would-deny into audit and leaves allows alone", "[evaluator]") {
    BundleBuilder bb;
    bb.allow("/srv", BW_FS_READ).deny("/srv/secret").audit();
    Bundle b = bb.build();
    auto d = evaluate(b, open_op("/srv/secret/k"));
    CHECK(d.verdict == Verdict::Audit);
    CHECK(d.rule_id == 1);
    CHECK_THAT(d.explanation, Catch::StartsWith("audit mode"));
    CHECK(evaluate(b, open_op("/srv/x")).verdict == Verdict::Allow);
    CHECK(evaluate(b, open_op("/etc/x")).verdict == Verdict::Audit);
    CHECK(evaluate_tables(b, open_op("/etc/x")).verdict == Verdict::Audit);
}

TEST_CASE("file map entries merge rules on one path; first rule in source order attributes",
          "[evaluator][tables]") {
    std::vector<FileRule> rules = {{"/a", BW_FS_READ, 0, 3},
                                   {"/b", 0, BW_FS_WRITE, 4},
                                   {"/a", BW_FS_WRITE, BW_FS_EXEC, 5}};
    auto e = build_file_entries(rules);
    REQUIRE(e.size() == 2);
    CHECK(e[0].path == "/a");
    CHECK(e[0].value.allow == (BW_FS_READ | BW_FS_WRITE));
    CHECK(e[0].value.deny == BW_FS_EXEC);
    CHECK(e[0].value.allow_rule_id == 3);
    CHECK(e[0].value.deny_rule_id == 5);
    CHECK(e[1].value.allow_rule_id == BW_NO_RULE);
    CHECK(e[1].value.deny_rule_id == 4);
}

TEST_CASE("rules of several lists on one path: rule_id is the kernel's attribution, right_rule_id the list "
          "that carries the right",
          "[evaluator]") {
    BundleBuilder bb;
    bb.allow("/srv/t1", BW_FS_READ)
        .allow("/srv/t1", BW_FS_CREATE)
        .deny("/srv/t1/.git", BW_FS_READ)
        .deny("/srv/t1/.git", BW_FS_CREATE);
    Bundle b = bb.build();
    auto d = evaluate(b, file_op(OpKind::Create, "/srv/t1/new.txt"));
    CHECK(d.verdict == Verdict::Allow);
    CHECK(d.rule_id == 0);        // the map entry names the first rule on the path
    CHECK(d.right_rule_id == 1);  // the create rule grants it
    CHECK(evaluate(b, open_op("/srv/t1/x")).right_rule_id == 0);
    d = evaluate(b, file_op(OpKind::Create, "/srv/t1/.git/x"));
    CHECK(d.verdict == Verdict::Deny);
    CHECK(d.rule_id == 2);
    CHECK(d.right_rule_id == 3);
    // no rule: both are the default
    d = evaluate(b, open_op("/etc/passwd"));
    CHECK(d.rule_id == BW_NO_RULE);
    CHECK(d.right_rule_id == BW_NO_RULE);
}
