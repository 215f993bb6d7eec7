#pragma once
// Where this process sits in the cgroup hierarchies, from /proc and statfs.
#include <string>

namespace bulwark {

// Where this process sits: "" on error. `controller` "" = cgroup v2 line.
std::string own_cgroup(const std::string& controller);
// Mount point of a v1 controller or of the v2 hierarchy ("" if none).
std::string cgroup_mount(const std::string& controller);

}  // namespace bulwark
