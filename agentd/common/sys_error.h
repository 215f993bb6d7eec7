#pragma once
// A failed system call, named with its arguments, for typed results.
#include <cerrno>
#include <string>

namespace bulwark {

struct SysError {
    std::string call;  // e.g. "openat(/sys/fs/cgroup/unified/x, O_DIRECTORY)"
    int err = 0;       // errno

    // "call: strerror (ENAME)"
    std::string message() const;
    static SysError last(std::string call) { return SysError{std::move(call), errno}; }
};

// "EPERM" (the number when the name is unknown).
std::string errno_name(int err);
// "Operation not permitted (EPERM)".
std::string errno_text(int err);

}  // namespace bulwark
