#include "sandbox/seccomp_install.h"

#include "sandbox/launch_child.h"

#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <string>

namespace bulwark {

const std::string& seccomp_canary() {
    static const std::string result = []() -> std::string {
        int st = run_canary_child(
            [](void*) {
                sock_filter f[] = {
                    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
                    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_getppid, 0, 1),
                    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
                    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
                };
                sock_fprog prog{static_cast<unsigned short>(sizeof f / sizeof f[0]), f};
                if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
                    ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0)
                    ::_exit(2);
                long r = ::syscall(SYS_getppid);
                ::_exit(r < 0 && errno == ENOSYS ? 0 : 1);
            },
            nullptr);
        if (st < 0) return std::string("canary child: ") + std::strerror(-st);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return "";
        if (WIFEXITED(st) && WEXITSTATUS(st) == 1) return "canary: a call the filter had to deny went through";
        return "canary: could not install a seccomp filter";
    }();
    return result;
}

std::expected<SeccompPrep, std::string> prepare_seccomp(const policy::SeccompPlan& plan) {
    if (const auto& bad = seccomp_canary(); !bad.empty()) return std::unexpected("seccomp: " + bad);
    if (plan.program.empty())
        return std::unexpected("the bundle carries no seccomp program; a tool never starts without one");
    if (plan.program.size() > BPF_MAXINSNS)
        return std::unexpected("seccomp program has " + std::to_string(plan.program.size()) +
                               " instructions, the kernel accepts at most " + std::to_string(BPF_MAXINSNS));
    SeccompPrep prep;
    prep.program = plan.program;
    prep.finalize();
    prep.status.name = "seccomp";
    prep.status.state = LayerState::Enforcing;
    prep.status.detail = std::to_string(plan.program.size()) + " BPF instructions, baseline " +
                         (plan.baseline.empty() ? std::string("(unnamed)") : plan.baseline) +
                         ", canary denied, denials logged to kernel audit (SECCOMP_FILTER_FLAG_LOG)";
    // The kernel logs an action of a FLAG_LOG filter only when its name is
    // in this sysctl (default: every action but allow).
    std::ifstream logged("/proc/sys/kernel/seccomp/actions_logged");
    std::string actions;
    std::getline(logged, actions);
    for (const char* a : {"errno", "kill_process", "kill_thread", "trap"})
        if ((" " + actions + " ").find(std::string(" ") + a + " ") == std::string::npos)
            prep.status.dropped.push_back(std::string("audit of ") + a + " actions (not in /proc/sys/kernel/seccomp/actions_logged: '" +
                                          actions + "')");
    return prep;
}

int seccomp_child_install(const SeccompPrep& prep) {
    // FLAG_LOG: every action but allow reaches the kernel audit (errno
    // actions are otherwise never logged), where agentd's kernel audit
    // source turns them into decision records.
    if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_LOG, &prep.fprog) != 0) return -errno;
    return 0;
}

}  // namespace bulwark
