#pragma once
// Where this process sits in the cgroup hierarchies, from /proc and statfs.
#include <expected>
#include <string>

#include "common/sys_error.h"

namespace bulwark {

// The cgroup v2 mount point (the first cgroup2 line of /proc/self/mountinfo),
// e.g. /sys/fs/cgroup/unified.
std::expected<std::string, SysError> cgroup2_mount();
// This process's cgroup v2 path, e.g. "/" (the 0:: line of /proc/self/cgroup).
std::expected<std::string, SysError> own_cgroup2_path();

// Where this process sits: "" on error. `controller` "" = cgroup v2 line.
std::string own_cgroup(const std::string& controller);
// Mount point of a v1 controller or of the v2 hierarchy (cgroup2_mount())
// ("" if none).
std::string cgroup_mount(const std::string& controller);

}  // namespace bulwark
