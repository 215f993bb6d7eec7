#include "sandbox/ns_pid.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace bulwark {

namespace {
constexpr const char* kSysctl = "/proc/sys/vm/memfd_noexec";
}

int pid_child_memfd_noexec() {
    int fd = ::open(kSysctl, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    ssize_t n = ::write(fd, "2", 1);
    int saved = errno;
    ::close(fd);
    return n == 1 ? 0 : -saved;
}

bool memfd_noexec_supported() { return ::access(kSysctl, F_OK) == 0; }

}  // namespace bulwark
