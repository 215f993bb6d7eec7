#include <catch2/catch.hpp>

#include "bulwark/policy/instantiate.h"
#include "policy_fixtures.h"

using namespace bulwark::test;

namespace {
TaskVars vars() {
    return {{"workdir", "/srv/t1"}, {"home", "/home/agent"}, {"tmp", "/tmp/t1"}, {"task_id", "t1"}};
}
Resolver hosts(std::map<std::string, std::vector<std::string>, std::less<>> table) {
    return [table](std::string_view h) -> std::expected<std::vector<std::string>, std::string> {
        auto it = table.find(h);
        if (it == table.end()) return std::unexpected(std::string("NXDOMAIN"));
        return it->second;
    };
}
}  // namespace

TEST_CASE("variables are resolved in paths, environment and map entries", "[instantiate]") {
    BundleBuilder bb;
    bb.allow("${workdir}", BW_FS_READ | BW_FS_WRITE).deny("${home}/.ssh").allow("/cache/${task_id}/x", BW_FS_READ);
    bb.b.env.set = {{"HOME", "${workdir}"}, {"TMPDIR", "${tmp}"}, {"TAG", "run-${task_id}"}};
    bb.b.landlock.paths = {{"${workdir}", 3, 0}};
    Bundle compiled = bb.b;

    auto r = instantiate(compiled, vars(), {});
    REQUIRE(r);
    CHECK(r->files[0].path == "/srv/t1");
    CHECK(r->files[1].path == "/home/agent/.ssh");
    CHECK(r->files[2].path == "/cache/t1/x");
    CHECK(r->env.set[0].second == "/srv/t1");
    CHECK(r->env.set[2].second == "run-t1");
    CHECK(r->landlock.paths[0].path == "/srv/t1");
    REQUIRE(r->bpf.files.size() == 3);
    CHECK(r->bpf.files[1].path == "/home/agent/.ssh");
    CHECK(r->bpf.header.flags & BW_POL_FILES_ENFORCED);
    CHECK(is_instantiated(*r));
    CHECK_FALSE(is_instantiated(compiled));
    CHECK(evaluate(*r, open_op("/srv/t1/a", FileAccess::Write)).verdict == Verdict::Allow);
    CHECK(evaluate(*r, open_op("/home/agent/.ssh/id_rsa")).verdict == Verdict::Deny);
}

TEST_CASE("one task's variables: home is the workdir unless given, tmp the sandbox's own", "[instantiate]") {
    CHECK(task_vars("/srv/t1", "task-7") ==
          TaskVars{{"workdir", "/srv/t1"}, {"home", "/srv/t1"}, {"tmp", "/tmp"}, {"task_id", "task-7"}});
    CHECK(task_vars("/srv/t1", "run-42", "/home/agent") ==
          TaskVars{{"workdir", "/srv/t1"}, {"home", "/home/agent"}, {"tmp", "/tmp"}, {"task_id", "run-42"}});
    for (const auto& [name, value] : task_vars("/srv/t1", "task-7")) CHECK(check_task_variable(name, value));
}

TEST_CASE("variable values are validated", "[instantiate]") {
    CHECK(check_task_variable("workdir", "/srv/t1"));
    CHECK_FALSE(check_task_variable("workdir", "srv/t1"));
    CHECK_FALSE(check_task_variable("workdir", "/srv/t1/"));
    CHECK_FALSE(check_task_variable("workdir", "/srv//t1"));
    CHECK_FALSE(check_task_variable("workdir", "/srv/../etc"));
    CHECK_FALSE(check_task_variable("workdir", "/"));
    CHECK_FALSE(check_task_variable("home", ""));
    CHECK(check_task_variable("task_id", "T-42_a.b"));
    CHECK_FALSE(check_task_variable("task_id", ".."));
    CHECK_FALSE(check_task_variable("task_id", "a/b"));
    CHECK_FALSE(check_task_variable("task_id", std::string(65, 'a')));
    CHECK_FALSE(check_task_variable("task_id", ""));
    CHECK_FALSE(check_task_variable("user", "x"));

    BundleBuilder bb;
    bb.allow("${workdir}", BW_FS_READ);
    auto v = vars();
    v["workdir"] = "/srv/t1/";
    auto r = instantiate(bb.b, v, {});
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message, Catch::Contains("not a normalised path"));
}

TEST_CASE("unknown or missing variables refuse the instantiation, naming the rule",
          "[instantiate]") {
    BundleBuilder bb;
    bb.allow("/srv", BW_FS_READ).allow("${scratch}/x", BW_FS_READ);
    auto r = instantiate(bb.b, vars(), {});
    REQUIRE_FALSE(r);
    CHECK(r.error().rule_id == 1);
    CHECK_THAT(r.error().message, Catch::Contains("unknown variable ${scratch}"));

    BundleBuilder b2;
    b2.allow("${tmp}", BW_FS_READ);
    auto v = vars();
    v.erase("tmp");
    auto r2 = instantiate(b2.b, v, {});
    REQUIRE_FALSE(r2);
    CHECK_THAT(r2.error().message, Catch::Contains("has no value for this task"));
}

TEST_CASE("host rules resolve to /128 rules; failures refuse", "[instantiate]") {
    BundleBuilder bb;
    bb.host_rule("api.github.com", 443).host_rule("evil.example", 0, BW_NET_ACTION_DENY);
    bb.b.network.rules[1].port_hi = 65535;
    auto r = instantiate(bb.b, vars(),
                         hosts({{"api.github.com", {"140.82.112.5", "2606:50c0::1", "140.82.112.5"}},
                                {"evil.example", {"203.0.113.9"}}}));
    REQUIRE(r);
    REQUIRE(r->network.rules.size() == 3);
    for (const auto& rule : r->network.rules) {
        CHECK_FALSE(rule.host);
        CHECK(rule.prefix == 128);
    }
    CHECK(is_v4_mapped(r->network.rules[0].addr));
    CHECK(r->bpf.net.size() == 3);
    for (auto eval : {&evaluate, &evaluate_tables}) {
        CHECK(eval(*r, net_op(OpKind::Connect, "140.82.112.5", 443)).verdict == Verdict::Allow);
        CHECK(eval(*r, net_op(OpKind::Connect, "140.82.112.5", 443)).rule_id == 0);
        CHECK(eval(*r, net_op(OpKind::Connect, "2606:50c0::1", 443)).verdict == Verdict::Allow);
        CHECK(eval(*r, net_op(OpKind::Connect, "140.82.112.6", 443)).verdict == Verdict::Deny);
        CHECK(eval(*r, net_op(OpKind::Connect, "203.0.113.9", 443)).rule_id == 1);
    }

    auto missing = instantiate(bb.b, vars(), hosts({{"api.github.com", {"140.82.112.5"}}}));
    REQUIRE_FALSE(missing);
    CHECK(missing.error().rule_id == 1);
    CHECK_THAT(missing.error().message, Catch::Contains("evil.example' did not resolve: NXDOMAIN"));

    auto bad = instantiate(bb.b, vars(), hosts({{"api.github.com", {"not-an-ip"}}, {"evil.example", {}}}));
    REQUIRE_FALSE(bad);
    CHECK_THAT(bad.error().message, Catch::Contains("not an IP address"));

    auto none = instantiate(bb.b, vars(), {});
    REQUIRE_FALSE(none);
    CHECK_THAT(none.error().message, Catch::Contains("needs a resolver"));
}
