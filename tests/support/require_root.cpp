#include "tier_skip.h"

#include <unistd.h>

std::string bulwark::test::tier_requirements() {
    if (geteuid() != 0) return "privileged tier: needs root (run the suite as root)";
    return {};
}
