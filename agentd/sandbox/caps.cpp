#include "sandbox/caps.h"

#include <grp.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>

namespace bulwark {

int cap_last_cap() {
    std::ifstream in("/proc/sys/kernel/cap_last_cap");
    int v = -1;
    in >> v;
    return v > 0 ? v : 63;  // unknown: drop every bit there could be
}

int caps_child_drop(int last_cap, uid_t uid, gid_t gid, const char** failed_step) {
#define STEP(name, expr)          \
    if ((expr) != 0) {            \
        *failed_step = name;      \
        return -errno;            \
    }
    // Root inside the namespace gets nothing for free, and nobody can unlock it.
    STEP("prctl(PR_SET_SECUREBITS)",
         ::prctl(PR_SET_SECUREBITS,
                 SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                     SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
                     SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
                 0, 0, 0));
    for (int c = 0; c <= last_cap; ++c) {
        if (::prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0 && errno != EINVAL) {
            *failed_step = "prctl(PR_CAPBSET_DROP)";
            return -errno;
        }
    }
    STEP("prctl(PR_CAP_AMBIENT_CLEAR_ALL)", ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0));
    STEP("setgroups(0)", ::syscall(SYS_setgroups, 0, nullptr));
    STEP("setresgid", ::syscall(SYS_setresgid, gid, gid, gid));
    STEP("setresuid", ::syscall(SYS_setresuid, uid, uid, uid));
    __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2] = {};
    STEP("capset(0)", ::syscall(SYS_capset, &hdr, data));
    STEP("prctl(PR_SET_NO_NEW_PRIVS)", ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0));
#undef STEP
    return 0;
}

}  // namespace bulwark
