#pragma once
// Can the tool enter its workdir? The tool runs as unprivileged ids (the
// workdir's owner, or 65534 when root owns it) with no supplementary groups
// and no capabilities. Inside the sandbox only the workdir's own permissions
// stand between the tool and its cwd (the directories above it are the
// sandbox's own), so the parent checks exactly that, as those ids, before
// clone, and refuses with what to do; the child's chdir stays the backstop
// and its EACCES is explained the same way (workdir_denied_message).
#include <sys/types.h>

#include <string>

namespace bulwark {

// How the tool's ids were chosen, for the message.
enum class IdSource { Requested, WorkdirOwner, RootOwnedWorkdir };

// "" when uid/gid (without supplementary groups or capabilities) may search
// the directory `workdir` (an absolute, symlink-free path), else the refusal
// (workdir_denied_message). A check that cannot be made here returns "" and
// leaves the verdict to the child.
std::string check_workdir_access(const std::string& workdir, uid_t uid, gid_t gid, IdSource why);

// Which ids the tool runs as, why, that it cannot enter `workdir` (err is
// the errno seen, e.g. EACCES) and what to do about it.
std::string workdir_denied_message(const std::string& workdir, uid_t uid, gid_t gid, IdSource why, int err);

}  // namespace bulwark
