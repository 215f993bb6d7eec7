#pragma once
// User namespace. The tool runs as one unprivileged uid/gid, mapped 1:1 (the
// same number inside and outside, nothing else mapped, uid 0 in particular):
// files it creates in the workdir belong to that uid on the host too, and no
// id inside reaches root outside.
#include <sys/types.h>

#include <expected>

#include "common/sys_error.h"

namespace bulwark {

// Parent: writes uid_map and gid_map of the child (setgroups stays allowed
// for the child's own setgroups(0) that empties the supplementary groups).
std::expected<void, SysError> write_id_maps(pid_t child, uid_t uid, gid_t gid);

}  // namespace bulwark
