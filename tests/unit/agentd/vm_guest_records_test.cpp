// agentd/vm/guest_records: a guest's decision record as a record of the
// host's run.
#include <catch2/catch.hpp>

#include "bulwark/policy/compiler.h"
#include "vm/guest_records.h"

using namespace bulwark;

TEST_CASE("a guest decision becomes the host run's record, its rule named from the host's bundle",
          "[vm][guest_records]") {
    auto c = policy::compile_string("tool: t\nfiles:\n  read: [/data]\n  deny: [/data/keys]\n", "t.yaml", {});
    REQUIRE(c.ok());
    auto bundle = std::make_shared<const policy::Bundle>(*c.bundle);
    uint32_t deny_rule = 0;
    for (const auto& f : bundle->files)
        if (f.deny) deny_rule = f.rule_id;
    RunContext run{7, 42, "t", 3, bundle};
    nlohmann::json g = {{"kind", "decision"}, {"ts_ns", 5}, {"task_id", 99}, {"run_id", 1}, {"tool", "forged"},
                        {"rule", {{"id", deny_rule}, {"file", "forged.yaml"}, {"line", 1}, {"text", "forged"}}},
                        {"decision", "deny"}, {"errno", 13}, {"object", "/data/keys/a"}, {"layer", "bpf_lsm"},
                        {"op", "file_open"}, {"pid", 12}, {"comm", "cat"}};
    auto r = vm::guest_record(g, run);
    REQUIRE(r);
    CHECK(r->task_id == 7);
    CHECK(r->run_id == 42);
    CHECK(r->tool == "t");
    CHECK(r->policy_version == 3);
    CHECK(r->rule_file == "t.yaml");  // from the host's bundle, not the guest's words
    CHECK(r->rule_line == 4);
    CHECK(r->decision == BW_DECISION_DENY);
    CHECK(r->layer == BW_LAYER_BPF_LSM);
    CHECK(r->op == BW_OP_FILE_OPEN);
    CHECK(r->err == 13);
    CHECK(r->object == "/data/keys/a");
    auto d = nlohmann::json::parse(r->detail);
    CHECK(d["in_guest"] == true);
    CHECK(d["guest_ts_ns"] == 5);

    g["rule"]["id"] = 9999;
    CHECK_FALSE(vm::guest_record(g, run));  // a rule the run's bundle does not have
    CHECK_FALSE(vm::guest_record({{"kind", "run_exit"}}, run));
    CHECK_FALSE(vm::guest_record({{"kind", "decision"}, {"layer", "nowhere"}, {"decision", "deny"}}, run));
    CHECK_FALSE(vm::guest_record("not an object", run));
}
