#include "common/sys_error.h"

#include <cstring>

namespace bulwark {

std::string SysError::message() const {
    const char* name = strerrorname_np(err);
    return call + ": " + std::strerror(err) + " (" + (name ? name : std::to_string(err)) + ")";
}

}  // namespace bulwark
