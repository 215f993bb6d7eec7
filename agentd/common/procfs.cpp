#include "common/procfs.h"

#include <linux/magic.h>
#include <sys/statfs.h>

#include <fstream>
#include <sstream>

namespace bulwark {
namespace {

bool is_fs(const std::string& path, long magic) {
    struct statfs st{};
    return ::statfs(path.c_str(), &st) == 0 && st.f_type == magic;
}

}  // namespace

std::string own_cgroup(const std::string& controller) {
    std::ifstream in("/proc/self/cgroup");
    std::string line;
    while (std::getline(in, line)) {
        auto a = line.find(':');
        auto b = line.find(':', a + 1);
        if (a == std::string::npos || b == std::string::npos) continue;
        std::string ctrls = line.substr(a + 1, b - a - 1);
        std::string path = line.substr(b + 1);
        if (controller.empty()) {
            if (line.compare(0, a, "0") == 0 && ctrls.empty()) return path;
            continue;
        }
        std::istringstream cs(ctrls);
        std::string c;
        while (std::getline(cs, c, ','))
            if (c == controller) return path;
    }
    return "";
}

std::string cgroup_mount(const std::string& controller) {
    if (controller.empty()) {
        if (is_fs("/sys/fs/cgroup/unified", CGROUP2_SUPER_MAGIC)) return "/sys/fs/cgroup/unified";
        if (is_fs("/sys/fs/cgroup", CGROUP2_SUPER_MAGIC)) return "/sys/fs/cgroup";
        return "";
    }
    std::string p = "/sys/fs/cgroup/" + controller;
    return is_fs(p, CGROUP_SUPER_MAGIC) ? p : "";
}

}  // namespace bulwark
