#include "common/sys_error.h"

#include <cstring>

namespace bulwark {

std::string errno_name(int err) {
    const char* name = strerrorname_np(err);
    return name ? name : std::to_string(err);
}

std::string errno_text(int err) { return std::string(std::strerror(err)) + " (" + errno_name(err) + ")"; }

std::string SysError::message() const { return call + ": " + errno_text(err); }

}  // namespace bulwark
