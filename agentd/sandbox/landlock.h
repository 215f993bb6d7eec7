#pragma once
// Landlock layer. Parent: probe the ABI, create the ruleset from the bundle's
// plan at the best ABI (rights the kernel lacks are dropped and reported one
// by one), add the verified binary. Child: add rules for the sandbox's own
// mounts (/tmp, /dev nodes, /proc), then restrict_self (async-signal-safe).
#include <cstdint>
#include <expected>
#include <string>
#include <vector>

#include "bulwark/policy/bundle.h"
#include "bulwark/policy/landlock_abi.h"
#include "common/fd.h"
#include "sandbox/run_report.h"
#include "common/sys_error.h"

namespace bulwark {

// Landlock UAPI values (the Debian 12 headers stop at ABI 1).
// The kernel's Landlock rights (bulwark/policy/landlock_abi.h: the UAPI
// values, with those newer than the build host's headers), by short names.
namespace ll {
inline constexpr uint64_t kExecute = LANDLOCK_ACCESS_FS_EXECUTE, kWriteFile = LANDLOCK_ACCESS_FS_WRITE_FILE,
                          kReadFile = LANDLOCK_ACCESS_FS_READ_FILE, kReadDir = LANDLOCK_ACCESS_FS_READ_DIR,
                          kRemoveDir = LANDLOCK_ACCESS_FS_REMOVE_DIR, kRemoveFile = LANDLOCK_ACCESS_FS_REMOVE_FILE,
                          kMakeChar = LANDLOCK_ACCESS_FS_MAKE_CHAR, kMakeDir = LANDLOCK_ACCESS_FS_MAKE_DIR,
                          kMakeReg = LANDLOCK_ACCESS_FS_MAKE_REG, kMakeSock = LANDLOCK_ACCESS_FS_MAKE_SOCK,
                          kMakeFifo = LANDLOCK_ACCESS_FS_MAKE_FIFO, kMakeBlock = LANDLOCK_ACCESS_FS_MAKE_BLOCK,
                          kMakeSym = LANDLOCK_ACCESS_FS_MAKE_SYM, kRefer = LANDLOCK_ACCESS_FS_REFER,
                          kTruncate = LANDLOCK_ACCESS_FS_TRUNCATE, kIoctlDev = LANDLOCK_ACCESS_FS_IOCTL_DEV;
inline constexpr uint64_t kBindTcp = LANDLOCK_ACCESS_NET_BIND_TCP, kConnectTcp = LANDLOCK_ACCESS_NET_CONNECT_TCP;
inline constexpr uint64_t kScopeAbstractUnix = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET,
                          kScopeSignal = LANDLOCK_SCOPE_SIGNAL;
inline constexpr uint64_t kFileRights = kExecute | kWriteFile | kReadFile | kTruncate | kIoctlDev;
// Every fs right of ABI n (n = 1..7).
uint64_t fs_rights_for_abi(int abi);
uint64_t net_rights_for_abi(int abi);
uint64_t scopes_for_abi(int abi);
std::vector<std::string> fs_right_names(uint64_t rights);
}  // namespace ll

// Landlock ABI version of the running kernel (0: unavailable), probed once.
int landlock_abi();

// Truth check, run once: a forked child restricts itself with a ruleset that
// handles read_file and grants nothing, then opens /proc/self/status (which
// it must no longer be able to). "" when Landlock really denied it, else why
// the layer cannot be counted as enforcing.
const std::string& landlock_canary();

struct LandlockPrep {
    Fd ruleset;          // invalid when the layer is not in force
    int abi = 0;
    uint64_t handled_fs = 0;
    uint32_t restrict_flags = 0;
    // The private /tmp gets no grant when the workdir is mounted below it:
    // Landlock rules cover everything beneath a directory, mounts included.
    bool skip_private_tmp = false;
    // Rights of a rule on "/": granted again on the sandbox's own root in the
    // child, after its mounts (the host's root is not the sandbox's).
    uint64_t view_root = 0;
    LayerStatus status;  // name "landlock"
};

// Builds the ruleset from bundle.landlock. binary_fd gets EXECUTE|READ_FILE
// (the verified tool). A path rule whose path does not exist is reported
// (warnings, naming the rule's file:line:col) and skipped: Landlock grants
// rights on objects that exist when the ruleset is built.
// workdir: where the run's work directory is mounted in the sandbox.
// canary: run landlock_canary() first (a caller whose host already proved
// Landlock, like the OCI launcher inside a container, skips it: its denial
// would be recorded against the container).
std::expected<LandlockPrep, SysError> prepare_landlock(const policy::Bundle& bundle,
                                                       int binary_fd, const std::string& workdir,
                                                       std::vector<std::string>& warnings, bool canary = true);

// Child side, async-signal-safe: grants the sandbox's private mounts their
// rights (each masked to what the ruleset handles), then restricts. Returns 0
// or -errno.
int landlock_child_apply(const LandlockPrep& prep);

}  // namespace bulwark
