#pragma once
// A typical tool policy built in code (the compiler is not merged yet): a
// default-deny seccomp allow-list answering ENOSYS (built with libseccomp),
// Landlock over every fs right (read+exec /usr, read /etc, all rights in the
// workdir), abstract-unix and signal scoping, network none.
#include <string>
#include <vector>

#include "bulwark/policy/bundle.h"

namespace bulwark::test {

struct BundleOptions {
    std::vector<std::string> binaries;
    std::string workdir;              // "" = none
    bool seccomp = true;
    bool landlock = true;
    // With seccomp: an allow-all program instead of the allow-list. The
    // posture still holds (Seccomp 2, NoNewPrivs) but the layer refuses
    // nothing: the attempts' per-layer proofs run with it off.
    bool seccomp_allow_all = false;
    std::vector<std::string> extra_denied_syscalls;  // removed from the allow-list
};

policy::Bundle make_bundle(const BundleOptions& o);

// `b` with layers switched off for a per-layer proof: seccomp becomes an
// allow-all program (the tool still starts: the posture check wants a
// filter), Landlock handles nothing; every rule is marked `unenforceable:
// run`, so that the launch is not refused for the rules the switched-off
// layer held. Everything else (namespaces, mounts, caps, limits, BPF) stays.
policy::Bundle without_layers(policy::Bundle b, bool seccomp_off, bool landlock_off);

// The allow-list the fixture uses (names), for reports.
const std::vector<std::string>& fixture_allowed_syscalls();

// Makes a fresh directory under /tmp owned by uid/gid 65534 (the sandbox's
// default ids when the workdir belongs to root are 65534; chown keeps the
// tests close to real use).
std::string make_workdir(const char* tag);
void remove_tree(const std::string& dir);

// Number of cgroup leaves this process left behind (bulwark-run-<pid>-*).
int leftover_cgroups();
// Runs `binary args...` unconfined: fork+exec as this process (in `cwd`
// when given), the controls of the escape batteries. Returns its stdout.
std::string run_unconfined(const std::string& binary, const std::vector<std::string>& args,
                           const std::string& cwd = "");

// Number of open descriptors of this process.
int open_fds();

}  // namespace bulwark::test
