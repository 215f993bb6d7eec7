#include "bulwark/version.h"

#include "bulwark/abi.h"

namespace bulwark {

std::string version_string() {
    return std::string("bulwark ") + BULWARK_VERSION + " (abi " + std::to_string(abi::kVersion) + ")";
}

}  // namespace bulwark
