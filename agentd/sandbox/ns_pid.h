#pragma once
// PID namespace. The tool is pid 1 of its own pid namespace: it sees no
// other process, and when it exits the kernel kills everything left in the
// namespace. Child side: the namespace's vm.memfd_noexec is set to 2, so no
// memfd in the sandbox can ever be executed (Landlock does not judge files
// on internal mounts, so fileless exec through memfd_create is closed here).
// The value is per pid namespace and can only be raised by descendants.
namespace bulwark {
// Must run while the child still has CAP_SYS_ADMIN in its user namespace and
// its fsuid is still the launcher's (the sysctl file belongs to host root).
// Returns 0, or -errno; -ENOENT when the kernel has no such sysctl (< 6.3).
int pid_child_memfd_noexec();
// Whether this kernel has the per-pid-namespace memfd_noexec sysctl.
bool memfd_noexec_supported();
}  // namespace bulwark
