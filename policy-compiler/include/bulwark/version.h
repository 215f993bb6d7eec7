#pragma once
#include <string>

namespace bulwark {
// "bulwark X.Y.Z (abi N)"
std::string version_string();
}
