#pragma once
// Mount namespace: the tool's filesystem view. Built in the parent as a plan
// of flat C strings, applied in the child (async-signal-safe):
//   / made MS_PRIVATE recursively; every bind source opened (O_PATH) before
//   anything is covered; a tmpfs new root; read-only nosuid nodev binds of
//   /usr, an /etc subset and the policy's read paths; /bin /lib* /sbin as the
//   host's symlinks; /dev with null zero full random urandom only (no tty,
//   no pts, no shm); a private /tmp tmpfs; a fresh /proc for the new pid ns;
//   the workdir bound read-write (nosuid nodev) at its own path; then
//   pivot_root, the old root detached, and the new root remounted read-only.
// Bind sources are resolved (realpath) and identified (dev, inode) by the
// parent; the child opens them with openat2(RESOLVE_NO_SYMLINKS) and refuses
// any that is not the same object: a symlink or rename swapped in between
// (e.g. in a workdir the tool's uid owns) fails the launch.
// Nothing of the daemon (its files, bpffs, /sys, cgroupfs, sockets) exists
// in the new root.
#include <cstdint>
#include <string>
#include <vector>

#include "bulwark/policy/bundle.h"

namespace bulwark {

struct MountEntry {
    enum Kind : uint8_t { BindRo, BindRw, BindDev, Symlink, Tmpfs, Proc, Dir } kind;
    std::string source;  // host path (binds, symlink-free), link target (Symlink), options (Tmpfs)
    std::string target;  // path inside the sandbox, absolute
    uint64_t dev = 0, ino = 0;  // binds: identity of the source seen by the parent
};

struct MountPlan {
    std::vector<MountEntry> entries;
    std::string workdir;  // inside == outside; "" = none (cwd is /)
    // Grants the sandbox cannot show, one line each naming the rule (the
    // run's report carries them as warnings), e.g. a host path under /tmp.
    std::vector<std::string> notes;
    // C views for the child, filled by finalize().
    struct Op {
        MountEntry::Kind kind;
        const char* source;
        const char* target;  // relative to the staging root ("usr/bin")
        int fd;              // child fills: O_PATH fd of the bind source
        uint64_t dev, ino;   // the child refuses a source that is not this object
    };
    std::vector<Op> ops;
    std::vector<std::string> rel_targets;
    void finalize();
};

// Builds the plan. workdir must be an existing absolute directory (or "").
MountPlan plan_mounts(const policy::Bundle& bundle, const std::string& workdir);

// Child side. Returns 0 or -errno; *failed names the failing step and path.
int mounts_child_apply(MountPlan& plan, const char** failed_call, const char** failed_path);

}  // namespace bulwark
