#include "tier_skip.h"

std::string bulwark::test::tier_requirements() { return {}; }
