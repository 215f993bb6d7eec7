#pragma once
// The posture check: the sandbox child read from outside, while it waits
// just before exec.
#include <sys/types.h>

#include <string>

namespace bulwark {

// Reads /proc/<pid>/status and checks Seccomp 2 (with >= 1 filter),
// NoNewPrivs 1, every capability set 0 and no uid/gid 0. "" when sound,
// else what is wrong.
std::string check_posture(pid_t pid);

}  // namespace bulwark
