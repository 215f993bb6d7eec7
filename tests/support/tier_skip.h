#pragma once
// Each test tier links exactly one definition of tier_requirements():
// tests/support/no_requirements.cpp for tiers that need nothing, or its own
// that returns the reason it cannot run here ("not root", "no qemu", ...).
#include <string>

namespace bulwark::test {
std::string tier_requirements();
}
