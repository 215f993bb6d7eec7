#include "mounts.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace bulwark {
namespace {

// Staging point for the new root inside the (private) mount namespace.
constexpr const char* kStage = "/tmp";

const char* const kEtcSubset[] = {
    "/etc/passwd", "/etc/group", "/etc/hosts", "/etc/resolv.conf", "/etc/nsswitch.conf",
    "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
    "/etc/ssl", "/etc/ca-certificates", "/etc/alternatives", "/etc/mime.types",
    "/etc/protocols", "/etc/services", "/etc/host.conf", "/etc/gai.conf",
};
const char* const kTopLinksOrDirs[] = {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"};
const char* const kDevNodes[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"};

bool exists(const std::string& p, struct stat* st) { return ::lstat(p.c_str(), st) == 0; }

bool covered(const std::vector<MountEntry>& es, const std::string& p) {
    for (const auto& e : es) {
        if (e.kind != MountEntry::BindRo && e.kind != MountEntry::BindRw) continue;
        if (p == e.target || (p.size() > e.target.size() && p.compare(0, e.target.size(), e.target) == 0 &&
                               p[e.target.size()] == '/'))
            return true;
    }
    return false;
}

// mkdir -p of a path relative to the cwd (the staging root). Async-signal-safe.
int mkdirs(const char* rel, bool last_is_file) {
    char buf[4096];
    size_t n = std::strlen(rel);
    if (n >= sizeof buf) return -ENAMETOOLONG;
    std::memcpy(buf, rel, n + 1);
    for (size_t i = 1; i <= n; ++i) {
        if (buf[i] != '/' && buf[i] != '\0') continue;
        bool last = buf[i] == '\0';
        char saved = buf[i];
        buf[i] = '\0';
        if (last && last_is_file) {
            int fd = ::open(buf, O_CREAT | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0644);
            if (fd < 0 && errno != EEXIST) return -errno;
            if (fd >= 0) ::close(fd);
        } else if (::mkdir(buf, 0755) != 0 && errno != EEXIST) {
            return -errno;
        }
        buf[i] = saved;
    }
    return 0;
}

int bind_from_fd(int src_fd, const char* target, uint64_t attrs, bool recursive) {
    int t = ::open_tree(src_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH |
                                        (recursive ? AT_RECURSIVE : 0));
    if (t < 0) return -errno;
    mount_attr a{};
    a.attr_set = attrs;
    int rc = ::mount_setattr(t, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0), &a, sizeof a);
    if (rc == 0) rc = ::move_mount(t, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH);
    int saved = errno;
    ::close(t);
    return rc == 0 ? 0 : -saved;
}

// A grant on a host path under /tmp reaches nothing: the sandbox's /tmp is a
// private tmpfs. ${tmp} names that private /tmp on purpose; the workdir, even
// under /tmp, is bound in. Grants of a task narrow the tool's rules, so only
// the rule file's own rules are named.
void note_hidden_tmp(const policy::Bundle& b, const policy::FileRule& r, const std::string& workdir,
                     std::vector<std::string>& notes) {
    if (!(r.allow & ~r.deny)) return;
    if (!workdir.empty() && (r.path == workdir || r.path.starts_with(workdir + "/"))) return;
    const policy::RuleRef* ref = b.rule(r.rule_id);
    if (!ref || ref->text.find("${tmp}") != std::string::npos || ref->text.starts_with("grant")) return;
    std::string note = ref->loc.file + ":" + std::to_string(ref->loc.line) + ":" + std::to_string(ref->loc.col) +
                       ": rule \"" + ref->text + "\" grants " + r.path +
                       ", which the sandbox does not show (each run gets a private, empty /tmp); use ${tmp} for "
                       "scratch files, or the workdir for files shared with the host";
    if (std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(std::move(note));
}

}  // namespace

MountPlan plan_mounts(const policy::Bundle& bundle, const std::string& workdir) {
    MountPlan p;
    auto& e = p.entries;
    struct stat st{};
    e.push_back({MountEntry::BindRo, "/usr", "/usr"});
    for (const char* t : kTopLinksOrDirs) {
        if (!exists(t, &st)) continue;
        if (S_ISLNK(st.st_mode)) {
            char target[4096];
            ssize_t n = ::readlink(t, target, sizeof target - 1);
            if (n <= 0) continue;
            target[n] = '\0';
            e.push_back({MountEntry::Symlink, target, t});
        } else if (S_ISDIR(st.st_mode)) {
            e.push_back({MountEntry::BindRo, t, t});
        }
    }
    for (const char* f : kEtcSubset)
        if (exists(f, &st) && !S_ISLNK(st.st_mode)) e.push_back({MountEntry::BindRo, f, f});
    // Paths the policy grants that the standard view lacks (read-only unless
    // the policy grants a modifying right there).
    for (const auto& r : bundle.files) {
        const std::string& path = r.path;
        if (path.empty() || path[0] != '/' || path == "/" || path.find("${") != std::string::npos) continue;
        if (path.starts_with("/proc") || path.starts_with("/sys") || path.starts_with("/dev")) continue;
        if (path == "/tmp" || path.starts_with("/tmp/")) {
            note_hidden_tmp(bundle, r, workdir, p.notes);
            continue;
        }
        if (!workdir.empty() && (path == workdir || path.starts_with(workdir + "/"))) continue;
        if (covered(e, path) || !exists(path, &st) || S_ISLNK(st.st_mode)) continue;
        if (!(r.allow & ~r.deny)) continue;
        bool rw = (r.allow & ~r.deny) & (BW_FS_WRITE | BW_FS_CREATE | BW_FS_REMOVE);
        e.push_back({rw ? MountEntry::BindRw : MountEntry::BindRo, path, path});
    }
    e.push_back({MountEntry::Dir, "", "/dev"});
    for (const char* d : kDevNodes)
        if (exists(d, &st)) e.push_back({MountEntry::BindDev, d, d});
    e.push_back({MountEntry::Symlink, "/proc/self/fd", "/dev/fd"});
    e.push_back({MountEntry::Symlink, "/proc/self/fd/0", "/dev/stdin"});
    e.push_back({MountEntry::Symlink, "/proc/self/fd/1", "/dev/stdout"});
    e.push_back({MountEntry::Symlink, "/proc/self/fd/2", "/dev/stderr"});
    e.push_back({MountEntry::Tmpfs, "mode=1777,size=256m,nr_inodes=65536", "/tmp"});
    e.push_back({MountEntry::Proc, "proc", "/proc"});
    if (!workdir.empty()) {
        e.push_back({MountEntry::BindRw, workdir, workdir});
        p.workdir = workdir;
    }
    p.finalize();
    return p;
}

namespace {
// Source identity for every bind; the source path becomes its realpath.
void identify(std::vector<MountEntry>& es) {
    for (auto& e : es) {
        if (e.kind != MountEntry::BindRo && e.kind != MountEntry::BindRw && e.kind != MountEntry::BindDev) continue;
        char real[4096];
        if (::realpath(e.source.c_str(), real)) e.source = real;
        struct stat st{};
        if (::stat(e.source.c_str(), &st) == 0) {
            e.dev = st.st_dev;
            e.ino = st.st_ino;
        }
    }
}
}  // namespace

void MountPlan::finalize() {
    identify(entries);
    rel_targets.clear();
    ops.clear();
    rel_targets.reserve(entries.size());
    for (const auto& en : entries) rel_targets.push_back(en.target.substr(1));
    for (size_t i = 0; i < entries.size(); ++i)
        ops.push_back({entries[i].kind, entries[i].source.c_str(), rel_targets[i].c_str(), -1, entries[i].dev,
                       entries[i].ino});
}

int mounts_child_apply(MountPlan& plan, const char** failed_call, const char** failed_path) {
#define FAIL(call, path)       \
    do {                       \
        int e_ = errno;        \
        *failed_call = call;   \
        *failed_path = path;   \
        return -e_;            \
    } while (0)
#define FAILRC(call, path, rc) \
    do {                       \
        *failed_call = call;   \
        *failed_path = path;   \
        return rc;             \
    } while (0)
    // 1. Nothing we do propagates back to the host.
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) FAIL("mount(MS_PRIVATE|MS_REC)", "/");
    // 2. Open every bind source while the host view is still whole.
    for (auto& op : plan.ops) {
        if (op.kind != MountEntry::BindRo && op.kind != MountEntry::BindRw && op.kind != MountEntry::BindDev)
            continue;
        open_how how{};
        how.flags = O_PATH | O_CLOEXEC | O_NOFOLLOW;
        how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
        op.fd = static_cast<int>(::syscall(SYS_openat2, AT_FDCWD, op.source, &how, sizeof how));
        if (op.fd < 0) FAIL("openat2(O_PATH, RESOLVE_NO_SYMLINKS)", op.source);
        struct stat st{};
        if (::fstat(op.fd, &st) != 0) FAIL("fstat", op.source);
        if (st.st_dev != op.dev || st.st_ino != op.ino) {
            errno = ESTALE;
            FAIL("bind source changed since the parent checked it", op.source);
        }
    }
    // 3. The new root: a tmpfs on the staging point.
    if (::mount("tmpfs", kStage, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m,nr_inodes=4096") != 0)
        FAIL("mount(tmpfs)", kStage);
    if (::chdir(kStage) != 0) FAIL("chdir", kStage);
    for (auto& op : plan.ops) {
        int rc = 0;
        switch (op.kind) {
            case MountEntry::Dir:
                rc = mkdirs(op.target, false);
                if (rc) FAILRC("mkdir", op.target, rc);
                break;
            case MountEntry::Symlink:
                if ((rc = mkdirs(op.target, false)) != 0 && rc != -EEXIST) FAILRC("mkdir", op.target, rc);
                ::rmdir(op.target);
                if (::symlink(op.source, op.target) != 0) FAIL("symlink", op.target);
                break;
            case MountEntry::BindRo:
            case MountEntry::BindRw:
            case MountEntry::BindDev: {
                struct stat st{};
                if (::fstat(op.fd, &st) != 0) FAIL("fstat", op.source);
                rc = mkdirs(op.target, !S_ISDIR(st.st_mode));
                if (rc) FAILRC("mkdir", op.target, rc);
                uint64_t attrs = MOUNT_ATTR_NOSUID;
                if (op.kind == MountEntry::BindRo) attrs |= MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV;
                if (op.kind == MountEntry::BindRw) attrs |= MOUNT_ATTR_NODEV;
                if (op.kind == MountEntry::BindDev) attrs |= MOUNT_ATTR_NOEXEC;
                rc = bind_from_fd(op.fd, op.target, attrs, S_ISDIR(st.st_mode));
                if (rc) FAILRC("open_tree/mount_setattr/move_mount", op.target, rc);
                ::close(op.fd);
                op.fd = -1;
                break;
            }
            case MountEntry::Tmpfs:
                if ((rc = mkdirs(op.target, false)) != 0) FAILRC("mkdir", op.target, rc);
                if (::mount("tmpfs", op.target, "tmpfs", MS_NOSUID | MS_NODEV, op.source) != 0)
                    FAIL("mount(tmpfs)", op.target);
                break;
            case MountEntry::Proc:
                // Must happen while the host's /proc is still visible in this
                // namespace (the kernel refuses a more revealing proc otherwise).
                if ((rc = mkdirs(op.target, false)) != 0) FAILRC("mkdir", op.target, rc);
                if (::mount("proc", op.target, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
                    FAIL("mount(proc)", op.target);
                break;
        }
    }
    // 4. Switch roots and drop the old one entirely.
    if (::syscall(SYS_pivot_root, ".", ".") != 0) FAIL("pivot_root", kStage);
    if (::umount2(".", MNT_DETACH) != 0) FAIL("umount2(old root, MNT_DETACH)", "/");
    if (::chdir("/") != 0) FAIL("chdir", "/");
    // 5. The root itself becomes read-only: no new top-level entries.
    if (::mount(nullptr, "/", nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) != 0)
        FAIL("mount(MS_REMOUNT|MS_RDONLY)", "/");
    if (!plan.workdir.empty() && ::chdir(plan.workdir.c_str()) != 0) FAIL("chdir", plan.workdir.c_str());
    return 0;
#undef FAIL
#undef FAILRC
}

}  // namespace bulwark
