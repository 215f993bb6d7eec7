#pragma once
// UTS namespace: the tool sees its own hostname; sethostname inside cannot
// reach the host's (and seccomp refuses it anyway). Child side.
namespace bulwark {
int uts_child_set_hostname(const char* name);  // 0 or -errno
}  // namespace bulwark
