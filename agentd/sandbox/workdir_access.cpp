#include "sandbox/workdir_access.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

#include "common/fd.h"
#include "common/sys_error.h"

namespace bulwark {

std::string workdir_denied_message(const std::string& workdir, uid_t uid, gid_t gid, IdSource why, int err) {
    std::string ids = "uid " + std::to_string(uid) + ", gid " + std::to_string(gid);
    std::string owner;
    struct stat st{};
    if (::stat(workdir.c_str(), &st) == 0) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
        owner = " (owner " + std::to_string(st.st_uid) + ":" + std::to_string(st.st_gid) + ", mode " + mode + ")";
    }
    const char* because = why == IdSource::Requested        ? "as requested"
                          : why == IdSource::WorkdirOwner   ? "the workdir's owner"
                                                            : "the workdir belongs to root, so the tool gets 65534";
    return "the tool runs as " + ids + " (" + because + ") and cannot enter its workdir " + workdir + owner + ": " +
           errno_name(err) + "; chown the workdir to the uid the tool should run as (the tool "
           "runs as the workdir's owner unless that is root), or make it accessible to uid " + std::to_string(uid) +
           " (e.g. chmod o+x " + workdir + ")";
}

std::string check_workdir_access(const std::string& workdir, uid_t uid, gid_t gid, IdSource why) {
    Fd dir(::open(workdir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
    if (!dir) return "";
    // A thread of its own takes the tool's filesystem ids: credentials are
    // per thread in the kernel, and these raw calls (unlike glibc's setxid
    // wrappers) change the calling thread only. An fsuid other than 0 drops
    // CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from its effective set, so the
    // kernel's own permission check (mode bits, ACLs, LSMs) decides.
    int verdict = 0;  // 0 allowed, >0 errno of the denial, <0 not checked
    std::thread([&] {
        if (::syscall(SYS_setgroups, 0, nullptr) != 0) {
            verdict = -1;
            return;
        }
        ::syscall(SYS_setfsgid, gid);
        ::syscall(SYS_setfsuid, uid);
        if (static_cast<uid_t>(::syscall(SYS_setfsuid, -1)) != uid ||
            static_cast<gid_t>(::syscall(SYS_setfsgid, -1)) != gid) {
            verdict = -1;
            return;
        }
        if (::syscall(SYS_faccessat2, dir.get(), "", X_OK, AT_EACCESS | AT_EMPTY_PATH) != 0)
            verdict = errno == EACCES || errno == EPERM ? errno : -1;
    }).join();
    return verdict > 0 ? workdir_denied_message(workdir, uid, gid, why, verdict) : "";
}

}  // namespace bulwark
