// The oracle the BPF programs are tested against: deciding from the rules and
// deciding from the exact map entries must agree on every operation.
#include <catch2/catch.hpp>

#include "policy_fixtures.h"

using namespace bulwark::test;

namespace {
// Bundles where no two rules share a path (each map entry has one rule).
bool unique_paths(const Bundle& b) {
    for (size_t i = 0; i < b.files.size(); ++i)
        for (size_t j = i + 1; j < b.files.size(); ++j)
            if (b.files[i].path == b.files[j].path) return false;
    return true;
}
}  // namespace

TEST_CASE("rules path and map-entry path agree on random bundles", "[evaluator][tables][property]") {
    RandomPolicy rp(0xB0A4C5ull);
    size_t cases = 0, denies = 0, rule_checks = 0;
    for (int i = 0; i < 600; ++i) {
        Bundle b;
        try {
            b = rp.bundle();
        } catch (const std::runtime_error&) {
            continue;  // more ranges than the table holds for one prefix
        }
        bool exact_ids = unique_paths(b);
        for (int k = 0; k < 25; ++k) {
            Operation op = rp.op();
            Decision r = evaluate(b, op);
            Decision t = evaluate_tables(b, op);
            INFO("bundle " << i << " op " << to_string(op.kind) << " " << op.path << " "
                           << format_addr(op.addr) << ":" << op.port << "\nrules:  "
                           << r.explanation << "\ntables: " << t.explanation);
            REQUIRE(r.verdict == t.verdict);
            REQUIRE(r.layer == t.layer);
            REQUIRE(r.rule_id == t.rule_id);
            rule_checks += exact_ids;
            ++cases;
            denies += r.verdict != Verdict::Allow;
        }
    }
    CHECK(cases > 10000);
    CHECK(denies > cases / 5);         // the generator exercises both outcomes
    CHECK(denies < cases * 9 / 10);
    CHECK(rule_checks > cases / 10);  // also bundles without shared paths
}
