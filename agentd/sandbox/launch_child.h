#pragma once
// The sandbox child of one launch: what it does between clone3 and execveat
// (child_main, steps c0..c15 in privilege order), how it is cloned, and the
// messages it sends its parent over the launch's sync socket. The parent's
// side of the launch (run_tool) is in spawner.cpp.
#include <linux/sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <expected>
#include <optional>
#include <string>

#include "sandbox/hardening.h"
#include "sandbox/landlock.h"
#include "sandbox/mounts.h"
#include "sandbox/seccomp_install.h"

namespace bulwark {

// Child -> parent messages over the sync socket. The parent answers with
// one byte: 'G' (namespaces and cgroups are set up: build the sandbox) and
// 'X' (posture checked: execute).
enum : uint32_t { kMsgReady = 1, kMsgSetupFailed = 2, kMsgExecFailed = 3 };
struct ChildMsg {
    uint32_t kind = 0;
    int32_t err = 0;
    char step[96] = {};
    char path[160] = {};
};

// Everything the child needs, prepared by the parent before clone: the child
// only reads it (and the mount plan's fd slots), never allocates.
struct ChildCtx {
    int sock = -1;
    int stdin_fd = -1, stdout_fd = -1, stderr_fd = -1;
    int bin_fd = -1;
    char* const* argv = nullptr;
    char* const* envp = nullptr;
    MountPlan* mounts = nullptr;
    const LandlockPrep* landlock = nullptr;
    const SeccompPrep* seccomp = nullptr;
    const HardeningPrep* hardening = nullptr;
    bool own_netns = true;
    bool memfd_noexec = true;
    int last_cap = 63;
    uid_t uid = 65534;
    gid_t gid = 65534;
    const char* hostname = "bulwark";
    struct Rl {
        int resource;
        rlim_t value;
    };
    Rl rlimits[8] = {};
    int n_rlimits = 0;
    const int* keep_fds = nullptr;
    size_t n_keep = 0;
    // Every descriptor the launch itself uses, ascending (the rest are the
    // daemon's, closed at once in the child).
    const int* own_fds = nullptr;
    size_t n_own = 0;
};

// The child's stack when it shares the daemon's address space until exec
// (see clone_sandbox_child). Must outlive the child's exec or its reaping.
class ChildStack {
public:
    static constexpr size_t kSize = 256 << 10;
    ChildStack();
    ~ChildStack();
    ChildStack(const ChildStack&) = delete;
    ChildStack& operator=(const ChildStack&) = delete;
    void* base() const { return base_; }

private:
    void* base_ = nullptr;
};

// Every signal blocked on the calling thread, until restore() or scope end.
class SignalsBlocked {
public:
    SignalsBlocked();
    ~SignalsBlocked() { restore(); }
    SignalsBlocked(const SignalsBlocked&) = delete;
    SignalsBlocked& operator=(const SignalsBlocked&) = delete;
    void restore();

private:
    sigset_t saved_{};
    bool active_ = true;
};

// clone3 with `ca`; the child runs child_main(c) and never returns. Where it
// can (x86-64, no sanitizer runtime) the child shares the address space until
// its exec, on a stack emplaced in `stack`. The calling thread must hold
// every signal blocked (SignalsBlocked) until the child has exec'd or died.
// Returns the child's pid, or the errno of clone3.
std::expected<pid_t, int> clone_sandbox_child(clone_args& ca, ChildCtx& c, std::optional<ChildStack>& stack);

// A layer's canary: fn(arg) in a child of its own that ends in _exit(2),
// making only system calls (no allocation, no lock; errno is the calling
// thread's). Where clone_sandbox_child shares the address space, so does
// this child, and the caller sleeps until it exits (CLONE_VFORK): no page
// table is copied, which on a large process is most of a fork's cost.
// Elsewhere, or where clone3 is refused (a container's seccomp profile),
// a fork. Signals are blocked meanwhile. The child's wait status, or -errno.
int run_canary_child(void (*fn)(void*), void* arg);

// One message from the child within timeout_ms.
enum class ChildReply { Message, Eof, Silent };
ChildReply read_child_msg(int sock, ChildMsg& m, int timeout_ms);
// "step path: strerror (ENAME)".
std::string describe_child_msg(const ChildMsg& m);

}  // namespace bulwark
