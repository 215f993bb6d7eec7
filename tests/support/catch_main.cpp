// Shared Catch2 main for every test tier. A tier may define
// bulwark_tier_requirements() (tier_skip.h) to exit 77 with a reason when
// what it needs is missing.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "tier_skip.h"

#include <cstdio>

int main(int argc, char** argv) {
    if (auto reason = bulwark::test::tier_requirements(); !reason.empty()) {
        std::printf("SKIP: %s\n", reason.c_str());
        return 77;
    }
    return Catch::Session().run(argc, argv);
}
