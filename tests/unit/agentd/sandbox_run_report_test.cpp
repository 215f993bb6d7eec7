// agentd/sandbox/run_report: the report's JSON read back (a guest agent's
// report on the host).
#include <catch2/catch.hpp>

#include "sandbox/run_report.h"

using namespace bulwark;

TEST_CASE("report_from_json inverts to_json", "[sandbox][run_report]") {
    RunReport r;
    r.tool = "cat";
    r.argv = {"cat", "x"};
    r.outcome = RunOutcome::Signaled;
    r.signal = 9;
    r.timed_out = true;
    r.stdout_truncated = true;
    r.usage.wall_us = 12;
    r.usage.peak_memory_bytes = 4096;
    r.layers = {{"landlock", LayerState::Enforcing, "ABI 6", {"truncate"}}, {"bpf", LayerState::Unavailable, "no", {}}};
    r.hardening = {"pie: yes"};
    r.warnings = {"w"};
    r.denials = {"d"};
    r.error = "e";
    r.refusal_code = "rule_unenforced";
    r.coverage = nlohmann::json::array({{{"kind", "files.read"}}});
    r.coverage_summary = "1 rule";
    r.unenforced = {"u"};
    auto back = report_from_json(to_json(r));
    REQUIRE(back);
    CHECK(to_json(*back) == to_json(r));
    CHECK(back->exit_status() == r.exit_status());
    CHECK(back->layers.size() == 2);
    CHECK(back->layers[0].dropped == std::vector<std::string>{"truncate"});
    CHECK(back->layer("bpf")->state == LayerState::Unavailable);

    CHECK_FALSE(report_from_json({{"outcome", "vanished"}}));
    CHECK_FALSE(report_from_json({{"outcome", "exited"}, {"layers", "not a list"}}));
    CHECK_FALSE(report_from_json(nlohmann::json::object()));
}
