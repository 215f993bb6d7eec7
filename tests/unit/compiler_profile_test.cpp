// profile: the block's values, what extends may do with it, its coverage
// rows, the BPF observation it turns on and its place in the bundle JSON.
#include "compiler_support.h"

#include "bulwark/policy/bpf_tables.h"
#include "bulwark/policy/coverage.h"
#include "bulwark/policy/explain.h"

using namespace bulwark::test;

TEST_CASE("profile: learn and respond compile, each traced to its rule", "[compiler][profile]") {
    auto b = require_ok("tool: t\nprofile: { learn: 50, respond: stop }\n");
    CHECK(b.profile.enabled);
    CHECK(b.profile.learn_runs == 50u);
    CHECK(b.profile.respond == ProfileResponse::Stop);
    REQUIRE(b.rule(b.profile.rule_of("respond")));
    CHECK(b.rule(b.profile.rule_of("respond"))->text == "profile.respond: stop");
    CHECK(b.rule(b.profile.rule_of("respond"))->loc.line == 2);

    auto defaults = require_ok("tool: t\nprofile: { respond: record }\n");
    CHECK(defaults.profile.enabled);
    CHECK(defaults.profile.learn_runs == 20u);
    CHECK(defaults.profile.task_learn_runs == 0u);  // no task profiles unless asked

    auto tasks = require_ok("tool: t\nprofile: { learn: 40, task_learn: 8 }\n");
    CHECK(tasks.profile.task_learn_runs == 8u);
    REQUIRE(tasks.rule(tasks.profile.rule_of("task_learn")));
    CHECK(tasks.rule(tasks.profile.rule_of("task_learn"))->text == "profile.task_learn: 8");
    require_error("tool: t\nprofile: { task_learn: 2 }\n", "bad-limit");
    require_error("tool: t\nprofile: { task_learn: 100001 }\n", "bad-limit");

    auto none = require_ok("tool: t\n");
    CHECK_FALSE(none.profile.enabled);

    require_error("tool: t\nprofile: {}\n", "empty-section");
    require_error("tool: t\nprofile: { learn: 2 }\n", "bad-limit");
    require_error("tool: t\nprofile: { learn: many }\n", "bad-limit");
    require_error("tool: t\nprofile: { learn: 100001 }\n", "bad-limit");
    require_error("tool: t\nprofile: { respond: shout }\n", "bad-value");
    require_error("tool: t\nprofile: { respond: record, window: 3d }\n", "unknown-key");
    require_error("tool: t\nprofile: record\n", "wrong-type");
}

TEST_CASE("profile: an extension cannot weaken the response", "[compiler][profile]") {
    RulesDir dir;
    dir.write("base/watched.yaml", "tool: w\nprofile: { learn: 40, respond: stop }\n");
    auto weaker = require_ok("tool: t\nextends: base/watched\nprofile: { learn: 10, respond: record }\n", {dir.path.string()});
    CHECK(weaker.profile.respond == ProfileResponse::Stop);
    CHECK(weaker.profile.learn_runs == 10u);
    auto respond_rows = [](const Bundle& b) {
        size_t n = 0;
        for (const auto& c : rule_coverage(b)) n += c.kind == "profile.respond";
        return n;
    };
    // One coverage row, for the response in effect (the base's stop).
    CHECK(respond_rows(weaker) == 1);
    dir.write("base/recorded.yaml", "tool: r\nprofile: { respond: record }\n");
    auto stronger = require_ok("tool: t\nextends: base/recorded\nprofile: { respond: require-grant }\n", {dir.path.string()});
    CHECK(stronger.profile.respond == ProfileResponse::RequireGrant);
    // The base's record, replaced, is no row; the extension's response is.
    auto cov = rule_coverage(stronger);
    CHECK(respond_rows(stronger) == 1);
    REQUIRE(coverage_row(cov, "profile.respond"));
    CHECK(coverage_row(cov, "profile.respond")->rule_id == stronger.profile.rule_of("respond"));
}

TEST_CASE("profile: only a response is a rule to hold, by agentd serve's scoring", "[compiler][profile][coverage]") {
    auto stop = require_ok("tool: t\nprofile: { learn: 5, respond: stop }\n");
    auto cov = rule_coverage(stop);
    REQUIRE(coverage_row(cov, "profile.respond"));
    REQUIRE(coverage_row(cov, "profile.respond")->layers.size() == 1);
    CHECK(coverage_row(cov, "profile.respond")->layers[0].layer == "profile");
    CHECK_FALSE(coverage_row(cov, "profile.learn"));
    // A finding that is only recorded holds nothing back from the tool.
    auto rec = require_ok("tool: t\nprofile: { learn: 5, respond: record }\n");
    CHECK_FALSE(coverage_row(rule_coverage(rec), "profile.respond"));
    CHECK(std::find(coverage_layers().begin(), coverage_layers().end(), "profile") != coverage_layers().end());
}

TEST_CASE("profile: the BPF programs report allowed decisions and processes for it", "[compiler][profile][bpf]") {
    auto with = build_policy_header(require_ok("tool: t\nprofile: { respond: record }\n"));
    CHECK((with.flags & BW_POL_REPORT_ALLOW));
    CHECK((with.flags & BW_POL_TRACE_PROC));
    CHECK((with.flags & BW_POL_COUNT_USAGE));
    CHECK_FALSE((with.flags & BW_POL_TRACE_SYSCALLS));
    auto without = build_policy_header(require_ok("tool: t\n"));
    CHECK_FALSE((without.flags & (BW_POL_REPORT_ALLOW | BW_POL_TRACE_PROC | BW_POL_COUNT_USAGE)));
}

TEST_CASE("profile: in the bundle JSON only when written, round-trips, shown by explain", "[compiler][profile][json]") {
    auto plain = require_ok("tool: t\n");
    CHECK_FALSE(bundle_to_json(plain).contains("profile"));
    auto b = require_ok("tool: t\nprofile: { learn: 30, respond: require-grant }\n");
    auto j = bundle_to_json(b);
    REQUIRE(j.contains("profile"));
    auto back = bundle_from_json(j);
    REQUIRE(back);
    CHECK(back->profile.enabled);
    CHECK(back->profile.learn_runs == 30u);
    CHECK(back->profile.respond == ProfileResponse::RequireGrant);
    CHECK(bundle_hash(*back) == b.hash);
    CHECK(b.hash != plain.hash);
    auto text = explain_text(b);
    CHECK(text.find("profile") != std::string::npos);
    CHECK(text.find("require-grant") != std::string::npos);
    CHECK(text.find("task_learn") == std::string::npos);
    // task_learn is written only when set: files without it keep their hash.
    CHECK_FALSE(j["profile"].contains("task_learn_runs"));
    auto t = require_ok("tool: t\nprofile: { learn: 30, respond: require-grant, task_learn: 5 }\n");
    auto tj = bundle_to_json(t);
    CHECK(tj["profile"]["task_learn_runs"] == 5);
    auto tback = bundle_from_json(tj);
    REQUIRE(tback);
    CHECK(tback->profile.task_learn_runs == 5u);
    CHECK(bundle_hash(*tback) == t.hash);
    CHECK(t.hash != b.hash);
    CHECK(explain_text(t).find("task_learn  5 runs") != std::string::npos);
}

TEST_CASE("profile: narrow sits between record and require-grant, and round-trips", "[compiler][profile]") {
    RulesDir dir;
    dir.write("base/narrowed.yaml", "tool: n\nprofile: { respond: narrow }\n");
    // A base's narrow is not undone by an extension's record ...
    auto kept = require_ok("tool: t\nextends: base/narrowed\nprofile: { respond: record }\n", {dir.path.string()});
    CHECK(kept.profile.respond == ProfileResponse::Narrow);
    // ... and gives way to its require-grant.
    auto held = require_ok("tool: t\nextends: base/narrowed\nprofile: { respond: require-grant }\n", {dir.path.string()});
    CHECK(held.profile.respond == ProfileResponse::RequireGrant);
    // A rule to hold, like the other responses that act.
    auto cov = rule_coverage(kept);
    REQUIRE(coverage_row(cov, "profile.respond"));
    auto back = bundle_from_json(bundle_to_json(kept));
    REQUIRE(back);
    CHECK(back->profile.respond == ProfileResponse::Narrow);
    CHECK(response_name(ProfileResponse::Narrow) == "narrow");
}
