// The policy compiler's seccomp output does not depend on the machine that
// compiles it (policy-compiler/src/seccomp_compile.cpp, new_ctx).
#include <catch2/catch.hpp>

#include <seccomp.h>

#include "bulwark/policy/seccomp.h"

using namespace bulwark::policy;

// libseccomp checks actions against the API level it probes from the running
// kernel. Under qemu-user seccomp() answers ENOSYS, the probe finds level 1,
// and every compile failed with "seccomp_attr_set(ACT_BADARCH): Invalid
// argument" (found by the arm64 tier). The compiler's output must not depend
// on the machine that compiles it.
TEST_CASE("the compile does not depend on the seccomp API level of the compiling kernel", "[seccomp]") {
    const unsigned before = seccomp_api_get();
    REQUIRE(seccomp_api_set(1) == 0);  // what the probe finds without seccomp()
    auto plan = compile_seccomp(SeccompSpec{});
    const unsigned after = seccomp_api_get();
    if (before >= 3) seccomp_api_set(before);
    REQUIRE(plan);
    CHECK(after == 3);
    CHECK(plan->program.size() >= 3);
}

