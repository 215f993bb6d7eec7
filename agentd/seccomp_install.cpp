#include "seccomp_install.h"

#include <linux/seccomp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace bulwark {

std::expected<SeccompPrep, std::string> prepare_seccomp(const policy::SeccompPlan& plan) {
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
                         ", arch check first";
    return prep;
}

int seccomp_child_install(const SeccompPrep& prep) {
    if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prep.fprog) != 0) return -errno;
    return 0;
}

}  // namespace bulwark
