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
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bulwark/policy/bundle.h"

namespace bulwark {

struct MountEntry {
    // Mask, Rebind and Pin act on an object already in the view (after every
    // bind), found at `target` without following symlinks and checked to be
    // the object the parent identified (dev, ino):
    //   Mask    an inaccessible read-only mount over it (an empty mode-0
    //           tmpfs over a directory, an empty mode-0 file over a file);
    //   Rebind  the object bound onto itself with `attrs` (read-only, noexec);
    //   Pin     the object bound onto itself unchanged: a mount point cannot
    //           be renamed or removed, so the path to a mask stays put.
    enum Kind : uint8_t { BindRo, BindRw, BindDev, Symlink, Tmpfs, Proc, Dir, Mask, Rebind, Pin } kind;
    std::string source;  // host path (binds, symlink-free), link target (Symlink), options (Tmpfs)
    std::string target;  // path inside the sandbox, absolute
    uint64_t dev = 0, ino = 0;  // binds: identity of the source seen by the parent
    uint64_t attrs = 0;         // Rebind: MOUNT_ATTR_* set on the object
};

// A deny below an allowed subtree (policy::RuleCoverage::deny_below_allow):
// Landlock cannot take those rights away again, so the mount namespace does.
struct DenyMaskRequest {
    uint32_t rule_id = 0;
    std::string path;     // instantiated, absolute
    uint32_t rights = 0;  // BW_FS_* denied
};

// What the mount layer does for one such deny at this launch.
struct DenyMaskResult {
    uint32_t rule_id = 0;
    bool held = false;
    std::string how;      // held: how; not held: why not
    // A placeholder (an empty directory made on the host for the mask to
    // cover, absent at launch) this run holds a reference to; "" if none.
    std::string placeholder;
    bool created = false;  // this run made it (else another live run had)
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
        uint64_t attrs;      // Rebind
    };
    std::vector<Op> ops;
    std::vector<std::string> rel_targets;
    std::vector<DenyMaskResult> masks;  // one per DenyMaskRequest, in request order
    void finalize();
};

// Builds the plan. workdir must be an existing absolute directory (or "").
// Each deny below an allowed subtree gets its mask (see DenyMaskResult); a
// missing deny path the tool could create is made first, as an empty
// directory owned by uid:gid, so that the mask has an object to cover.
// host_view: RunRequest::host_view (the host's directories read-only).
MountPlan plan_mounts(const policy::Bundle& bundle, const std::string& workdir,
                      const std::vector<DenyMaskRequest>& denies = {}, uid_t uid = 65534, gid_t gid = 65534,
                      bool host_view = false);

// Drops the run's references to its placeholders: the last one out removes
// what was made (bottom up, each directory only while empty). Run once the
// sandbox is gone (or was never built). Idempotent.
void release_placeholders(MountPlan& plan);

// Child side. Returns 0 or -errno; *failed names the failing step and path.
int mounts_child_apply(MountPlan& plan, const char** failed_call, const char** failed_path);

}  // namespace bulwark
