#include "sandbox/ns_user.h"

#include <fcntl.h>
#include <unistd.h>

#include <string>

namespace bulwark {
namespace {
std::expected<void, SysError> write_map(pid_t pid, const char* file, unsigned id) {
    std::string path = "/proc/" + std::to_string(pid) + "/" + file;
    std::string line = std::to_string(id) + " " + std::to_string(id) + " 1\n";
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return std::unexpected(SysError::last("open(" + path + ")"));
    ssize_t n = ::write(fd, line.data(), line.size());
    int saved = errno;
    ::close(fd);
    if (n != static_cast<ssize_t>(line.size())) {
        errno = saved;
        return std::unexpected(SysError::last("write(" + path + ", \"" + line.substr(0, line.size() - 1) + "\")"));
    }
    return {};
}
}  // namespace

std::expected<void, SysError> write_id_maps(pid_t child, uid_t uid, gid_t gid) {
    if (auto r = write_map(child, "uid_map", uid); !r) return r;
    return write_map(child, "gid_map", gid);
}

}  // namespace bulwark
