#pragma once
// Seccomp layer. Parent: take the bundle's compiled program (compiled before
// clone, never in the child) and check it can be installed. Child: install it
// as the very last restriction before exec (async-signal-safe).
#include <linux/filter.h>

#include <expected>
#include <string>
#include <vector>

#include "bulwark/policy/bundle.h"
#include "sandbox/run_report.h"

namespace bulwark {

struct SeccompPrep {
    std::vector<sock_filter> program;
    sock_fprog fprog{};  // points into program; fix up after moves with finalize()
    LayerStatus status;  // name "seccomp"
    void finalize() {
        fprog.len = static_cast<unsigned short>(program.size());
        fprog.filter = program.data();
    }
};

// Refuses empty or oversized programs (a launch without a filter is refused:
// the posture check demands Seccomp 2).
std::expected<SeccompPrep, std::string> prepare_seccomp(const policy::SeccompPlan& plan);

// Truth check, run once: a forked child installs a one-rule filter that
// answers getppid with ENOSYS and calls it. "" when the kernel really applied
// the filter, else why seccomp cannot be counted as enforcing.
const std::string& seccomp_canary();

// Child: PR_SET_NO_NEW_PRIVS must already be set. Returns 0 or -errno.
int seccomp_child_install(const SeccompPrep& prep);

}  // namespace bulwark
