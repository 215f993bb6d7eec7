#pragma once
// The BPF runtime's typed error at its edge (attach, bind, rebind).
#include <cstdint>
#include <optional>
#include <string>

#include "common/sys_error.h"

namespace bulwark::bpf {

// Why a run could not be attached, bound or rebound: a code callers switch
// on (a held lock is worth retrying; a cgroup outside the parent is not) and
// the sentence, with the failed system call where there was one.
struct BindError {
    enum class Code : uint8_t {
        NetProgramsDown,  // network rules, and the connect/sendmsg programs are not enforcing
        Ended,            // the run's binding was already released (the run has ended)
        AlreadyBound,     // the run's cgroup is bound already
        CgroupOutside,    // the run's cgroup is not below the runtime's cgroup parent
        LockHeld,         // the pin root's lock stayed held past the wait (holders named)
        Kernel,           // a map or cgroup operation failed (sys says which)
    };
    Code code = Code::Kernel;
    std::string message;
    std::optional<SysError> sys;
};

}  // namespace bulwark::bpf
