// agentd/tasks/grant_json.cpp: a task grant's JSON read into a policy grant.
// Unknown keys, wrong types and bad values are refused naming the field; the
// texts are pinned here (the root tier shows the same through the API).
#include <catch2/catch.hpp>

#include "tasks/grant_json.h"

using bulwark::grant_from_json;
using nlohmann::json;

namespace {

const bulwark::policy::TaskVars kVars = bulwark::policy::task_vars("/work/t1", "task-1");

std::string refusal(const json& grant) {
    auto g = grant_from_json(grant, kVars);
    return g ? std::string() : g.error();
}

}  // namespace

TEST_CASE("a grant reads into files, network, families and limits, variables instantiated") {
    auto g = grant_from_json(json::parse(R"({
        "files": [{"path": "${workdir}/out", "rights": ["read", "write"]}],
        "network": [{"host": "api.github.com", "ports": "443", "proto": ["tcp"], "ops": ["connect"]}],
        "families": ["inet", "unix"],
        "limits": {"timeout_ms": 5000, "pids": 16}
    })"),
                             kVars);
    if (!g) FAIL(g.error());
    REQUIRE(g->files);
    REQUIRE(g->files->size() == 1);
    CHECK((*g->files)[0].path == "/work/t1/out");
    REQUIRE(g->network);
    CHECK(g->network->size() == 1);
    CHECK_FALSE(g->network_none);
    REQUIRE(g->families);
    CHECK(g->limits.timeout_ms == 5000u);
    CHECK(g->limits.pids == 16u);

    auto none = grant_from_json(json{{"network", "none"}}, kVars);
    REQUIRE(none);
    CHECK(none->network_none);
    CHECK_FALSE(none->files);
}

TEST_CASE("a grant's refusals name the field") {
    CHECK(refusal(json::array()) == "grant: must be an object");
    CHECK(refusal(json{{"file", json::array()}}) == "grant: unknown key 'file'");
    CHECK(refusal(json{{"files", "all"}}) == "grant.files: must be an array");
    CHECK(refusal(json{{"files", {{{"rights", {"read"}}}}}}) == "grant.files[0]: 'path' is required");
    CHECK(refusal(json{{"files", {{{"path", "/x"}}}}}) == "grant.files[0]: 'rights' is required");
    CHECK(refusal(json{{"files", {{{"path", "/x"}, {"rights", {"read", "wrte"}}}}}}) ==
          "grant.files[0].rights[1]: unknown right 'wrte'");
    CHECK(refusal(json{{"files", {{{"path", "/x"}, {"rights", json::array()}}}}}) ==
          "grant.files[0].rights: must name at least one right");
    CHECK(refusal(json{{"network", "all"}}) == "grant.network: must be \"none\" or a list of rules");
    CHECK(refusal(json{{"network", {{{"ports", "443"}}}}}) ==
          "grant.network[0]: give exactly one of 'host' and 'cidr'");
    CHECK(refusal(json{{"families", {"inet", "martian"}}}) ==
          "grant.families[1]: unknown socket family 'martian'");
    CHECK(refusal(json{{"limits", {{"timeout", 5}}}}) == "grant.limits: unknown key 'timeout'");
    CHECK(refusal(json{{"limits", {{"pids", 0}}}}) == "grant.limits.pids: must be 1..4194304");
    CHECK(refusal(json{{"limits", {{"memory_bytes", "1G"}}}}) ==
          "grant.limits.memory_bytes: must be a non-negative integer");
}

TEST_CASE("the field path starts where the caller says the grant is") {
    auto g = grant_from_json(json{{"files", 1}}, kVars, "tasks[2].grant");
    REQUIRE_FALSE(g);
    CHECK(g.error() == "tasks[2].grant.files: must be an array");
}

TEST_CASE("a grant's microvm part: mode, memory and vCPUs, each checked", "[tasks][grant_json]") {
    auto g = grant_from_json(json{{"microvm", {{"mode", "required"}, {"memory_bytes", 268435456}, {"vcpus", 1}}}}, kVars);
    REQUIRE(g);
    CHECK(g->microvm_mode == bulwark::policy::MicroVmMode::Required);
    CHECK(g->microvm_memory_bytes == 268435456u);
    CHECK(g->microvm_vcpus == 1u);
    CHECK(refusal({{"microvm", {{"mode", "sometimes"}}}}).find("microvm.mode") != std::string::npos);
    CHECK(refusal({{"microvm", {{"memory_bytes", 1024}}}}).find("microvm.memory_bytes") != std::string::npos);
    CHECK(refusal({{"microvm", {{"vcpus", 0}}}}).find("microvm.vcpus") != std::string::npos);
    CHECK(refusal({{"microvm", {{"disk", 1}}}}).find("disk") != std::string::npos);
}
