#pragma once
// Capabilities and credentials. Child side only (async-signal-safe): lock the
// securebits, empty the bounding and ambient sets, switch to the sandbox
// uid/gid with no supplementary groups, clear every remaining set, and set
// no_new_privs.
#include <sys/types.h>

namespace bulwark {

// Reads /proc/sys/kernel/cap_last_cap in the parent (the child may not open it).
int cap_last_cap();

// Returns 0 or -errno; *failed_step names the call that failed.
int caps_child_drop(int last_cap, uid_t uid, gid_t gid, const char** failed_step);

}  // namespace bulwark
