// microvm: the block's values, what extends and grants may do with it, its
// coverage rows and its place in the bundle JSON.
#include "compiler_support.h"

#include <filesystem>
#include <fstream>

#include "bulwark/policy/coverage.h"
#include "bulwark/policy/explain.h"
#include "bulwark/policy/grants.h"

using namespace bulwark::test;

namespace {
std::vector<std::string> layers_of(const RuleCoverage& c) {
    std::vector<std::string> out;
    for (const auto& l : c.layers) out.push_back(l.layer);
    return out;
}
}  // namespace

TEST_CASE("microvm: mode, memory, vcpus and confidential compile, each traced to its rule", "[compiler][microvm]") {
    auto b = require_ok("tool: t\nmicrovm: { mode: required, memory: 512MiB, vcpus: 2 }\n");
    CHECK(b.microvm.mode == MicroVmMode::Required);
    CHECK(b.microvm.memory_bytes == 512ull << 20);
    CHECK(b.microvm.vcpus == 2u);
    CHECK_FALSE(b.microvm.confidential);
    REQUIRE(b.rule(b.microvm.rule_of("mode")));
    CHECK(b.rule(b.microvm.rule_of("mode"))->text == "microvm.mode: required");
    CHECK(b.rule(b.microvm.rule_of("mode"))->loc.line == 2);

    auto d = require_ok("tool: t\n");
    CHECK(d.microvm.mode == MicroVmMode::Off);
    CHECK(d.microvm.rule_ids.empty());

    // confidential implies required; with a weaker mode written it is an error.
    auto c = require_ok("tool: t\nmicrovm: { confidential: required }\n");
    CHECK(c.microvm.mode == MicroVmMode::Required);
    CHECK(c.microvm.confidential);
    require_error("tool: t\nmicrovm: { mode: preferred, confidential: required }\n", "confidential-needs-vm");
    require_error("tool: t\nmicrovm: { confidential: preferred }\n", "bad-value");
    require_error("tool: t\nmicrovm: { mode: maybe }\n", "bad-value");
    require_error("tool: t\nmicrovm: { memory: 64MiB }\n", "bad-limit");
    require_error("tool: t\nmicrovm: { memory: 1000000B }\n", "bad-limit");
    require_error("tool: t\nmicrovm: { vcpus: 0 }\n", "bad-limit");
    require_error("tool: t\nmicrovm: { vcpus: 65 }\n", "bad-limit");
    require_error("tool: t\nmicrovm: { mode: required, disk: 1GiB }\n", "unknown-key");
    require_error("tool: t\nmicrovm: required\n", "wrong-type");
}

TEST_CASE("microvm: an extension cannot take a tool out of its VM", "[compiler][microvm]") {
    namespace fs = std::filesystem;
    fs::path dir = fs::temp_directory_path() / ("bw-mvm-" + std::to_string(::getpid()));
    fs::create_directories(dir / "base");
    std::ofstream(dir / "base" / "vm.yaml") << "tool: vm\nmicrovm: { mode: required, memory: 512MiB }\n";
    auto weaker = require_ok("tool: t\nextends: base/vm\nmicrovm: { mode: off, memory: 256MiB }\n", {dir.string()});
    CHECK(weaker.microvm.mode == MicroVmMode::Required);
    CHECK(weaker.microvm.memory_bytes == 256ull << 20);
    std::ofstream(dir / "base" / "pref.yaml") << "tool: p\nmicrovm: { mode: preferred }\n";
    auto stricter = require_ok("tool: t\nextends: base/pref\nmicrovm: { mode: required }\n", {dir.string()});
    CHECK(stricter.microvm.mode == MicroVmMode::Required);
    fs::remove_all(dir);
}

TEST_CASE("microvm: coverage rows; confidential is never opted out", "[compiler][microvm][coverage]") {
    auto req = require_ok("tool: t\nmicrovm: { mode: required, vcpus: 1 }\n");
    auto cov = rule_coverage(req);
    REQUIRE(coverage_row(cov, "microvm.mode"));
    CHECK(layers_of(*coverage_row(cov, "microvm.mode")) == std::vector<std::string>{"microvm"});
    CHECK(layers_of(*coverage_row(cov, "microvm.vcpus")) == std::vector<std::string>{"microvm"});

    // preferred: the host sandbox holds it too (falling back, said in the report).
    auto pref = require_ok("tool: t\nmicrovm: { mode: preferred }\n");
    CHECK(layers_of(*coverage_row(rule_coverage(pref), "microvm.mode")) == std::vector<std::string>{"microvm", "supervisor"});

    auto conf = require_ok("tool: t\nunenforceable: run\nmicrovm: { confidential: required }\n");
    auto cc = rule_coverage(conf);
    REQUIRE(coverage_row(cc, "microvm.confidential"));
    CHECK(layers_of(*coverage_row(cc, "microvm.confidential")) == std::vector<std::string>{"tee"});
    CHECK_FALSE(coverage_row(cc, "microvm.confidential")->unenforceable_run);
    CHECK(std::find(coverage_layers().begin(), coverage_layers().end(), "tee") != coverage_layers().end());
}

TEST_CASE("microvm: in the bundle JSON only when written, round-trips, shown by explain", "[compiler][microvm][json]") {
    auto plain = require_ok("tool: t\n");
    CHECK_FALSE(bundle_to_json(plain).contains("microvm"));
    auto b = require_ok("tool: t\nmicrovm: { mode: preferred, memory: 1GiB, vcpus: 4 }\n");
    auto j = bundle_to_json(b);
    REQUIRE(j.contains("microvm"));
    auto back = bundle_from_json(j);
    REQUIRE(back);
    CHECK(back->microvm.mode == MicroVmMode::Preferred);
    CHECK(back->microvm.memory_bytes == 1ull << 30);
    CHECK(back->microvm.vcpus == 4u);
    // Recomputed from the round-tripped content (back->hash is the JSON's
    // "hash" field copied: comparing it with b.hash compared b.hash with itself).
    CHECK(bundle_hash(*back) == b.hash);
    CHECK(b.hash != plain.hash);
    auto text = explain_text(b);
    CHECK(text.find("microvm") != std::string::npos);
    CHECK(text.find("preferred") != std::string::npos);
}

TEST_CASE("microvm: a grant may move a tool into a VM and shrink it, never the reverse", "[grants][microvm]") {
    const auto now = Clock::time_point{} + std::chrono::hours(1000);
    auto pref = require_ok("tool: t\nmicrovm: { mode: preferred, memory: 512MiB, vcpus: 2 }\n");
    Grant up;
    up.microvm_mode = MicroVmMode::Required;
    up.microvm_memory_bytes = 256ull << 20;
    up.microvm_vcpus = 1;
    auto r = apply_grant(pref, up, now);
    REQUIRE(r);
    CHECK(r->bundle.microvm.mode == MicroVmMode::Required);
    CHECK(r->bundle.microvm.memory_bytes == 256ull << 20);
    CHECK(r->bundle.microvm.vcpus == 1u);

    Grant down;
    down.microvm_mode = MicroVmMode::Off;
    down.microvm_memory_bytes = 1ull << 30;
    down.microvm_vcpus = 3;
    auto refused = apply_grant(pref, down, now);
    REQUIRE_FALSE(refused);
    REQUIRE(refused.error().reasons.size() == 3);
    CHECK(refused.error().reasons[0].find("weaker than the tool's preferred (") != std::string::npos);
    CHECK(refused.error().reasons[0].find(":2:") != std::string::npos);
    CHECK(refused.error().reasons[1].find("microvm.memory") != std::string::npos);
    CHECK(refused.error().reasons[2].find("microvm.vcpus") != std::string::npos);
}
