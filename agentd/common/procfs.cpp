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

std::expected<std::string, SysError> cgroup2_mount() {
    std::ifstream in("/proc/self/mountinfo");
    if (!in) return std::unexpected(SysError::last("open(/proc/self/mountinfo)"));
    std::string line;
    while (std::getline(in, line)) {
        auto dash = line.find(" - ");
        if (dash == std::string::npos) continue;
        std::istringstream rest(line.substr(dash + 3));
        std::string fstype;
        rest >> fstype;
        if (fstype != "cgroup2") continue;
        std::istringstream f(line);
        std::string id, parent, devno, root, mnt;
        f >> id >> parent >> devno >> root >> mnt;
        return mnt;
    }
    return std::unexpected(SysError{"find cgroup2 mount in /proc/self/mountinfo", ENOENT});
}

std::expected<std::string, SysError> own_cgroup2_path() {
    std::ifstream in("/proc/self/cgroup");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("0::", 0) == 0) return line.substr(3);
    return std::unexpected(SysError{"find 0:: line in /proc/self/cgroup", ENOENT});
}

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
    if (controller.empty()) return cgroup2_mount().value_or("");
    std::string p = "/sys/fs/cgroup/" + controller;
    return is_fs(p, CGROUP_SUPER_MAGIC) ? p : "";
}

}  // namespace bulwark
