#include "sandbox/mounts.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/limits.h>

#include <algorithm>
#include <map>
#include <mutex>
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

// The object at `rel` (relative to the staging root), reached without
// symlinks and without leaving the staging root; -errno, or -ESTALE when it
// is not the object the parent identified.
int open_object(const char* rel, uint64_t dev, uint64_t ino) {
    open_how how{};
    how.flags = O_PATH | O_CLOEXEC | O_NOFOLLOW;
    how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_BENEATH;
    int fd = static_cast<int>(::syscall(SYS_openat2, AT_FDCWD, rel, &how, sizeof how));
    if (fd < 0) return -errno;
    struct stat st{};
    if (::fstat(fd, &st) != 0 || st.st_dev != dev || st.st_ino != ino) {
        ::close(fd);
        return -ESTALE;
    }
    return fd;
}

// Attaches the detached mount `tree` onto the object `fd`; closes tree.
int attach_onto(int tree, int fd, uint64_t attrs, bool recursive) {
    int rc = 0;
    if (attrs) {
        mount_attr a{};
        a.attr_set = attrs;
        rc = ::mount_setattr(tree, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0), &a, sizeof a);
    }
    if (rc == 0) rc = ::move_mount(tree, "", fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
    int saved = errno;
    ::close(tree);
    return rc == 0 ? 0 : -saved;
}

// An empty, mode-0, read-only tmpfs over directory `fd`, or an empty mode-0
// read-only file (from a tmpfs of its own) over file `fd`.
int mask_object(int fd, bool dir) {
    constexpr uint64_t kAttrs = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
    int fs = ::fsopen("tmpfs", FSOPEN_CLOEXEC);
    if (fs < 0) return -errno;
    int rc = ::fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0", 0);
    if (rc == 0) rc = ::fsconfig(fs, FSCONFIG_SET_STRING, "size", "4k", 0);
    if (rc == 0) rc = ::fsconfig(fs, FSCONFIG_CMD_CREATE, nullptr, nullptr, 0);
    int mnt = rc == 0 ? ::fsmount(fs, FSMOUNT_CLOEXEC, dir ? kAttrs : 0) : -1;
    int saved = errno;
    ::close(fs);
    if (mnt < 0) return -saved;
    if (dir) return attach_onto(mnt, fd, 0, false);
    int f = ::openat(mnt, "masked", O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0);
    if (f < 0) {
        saved = errno;
        ::close(mnt);
        return -saved;
    }
    ::close(f);
    int tree = ::open_tree(mnt, "masked", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    saved = errno;
    ::close(mnt);
    if (tree < 0) return -saved;
    return attach_onto(tree, fd, kAttrs, false);
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
    std::string note = ref->loc.text() +
                       ": rule \"" + ref->text + "\" grants " + r.path +
                       ", which the sandbox does not show (each run gets a private, empty /tmp); use ${tmp} for "
                       "scratch files, or the workdir for files shared with the host";
    if (std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(std::move(note));
}

}  // namespace

namespace {

bool under(const std::string& p, const std::string& dir) {
    return p == dir || dir == "/" || (p.size() > dir.size() && p.compare(0, dir.size(), dir) == 0 && p[dir.size()] == '/');
}

// The bind that shows host object `p` in the view (longest target), or null.
const MountEntry* view_entry(const std::vector<MountEntry>& es, const std::string& p) {
    const MountEntry* best = nullptr;
    for (const auto& e : es) {
        if (e.kind != MountEntry::BindRo && e.kind != MountEntry::BindRw) continue;
        if (under(p, e.target) && (!best || e.target.size() > best->target.size())) best = &e;
    }
    return best;
}

// Effective rights at `path`: the allows of every rule covering it minus
// the denies covering it (docs/rule-language.md, Semantics).
uint32_t rights_at(const policy::Bundle& b, const std::string& path) {
    uint32_t allow = 0, deny = 0;
    for (const auto& f : b.files)
        if (under(path, f.path)) allow |= f.allow, deny |= f.deny;
    return allow & ~deny;
}

std::string parent_of(const std::string& p) {
    auto slash = p.rfind('/');
    return slash == 0 ? "/" : p.substr(0, slash);
}

// mkdir of each missing component of `path` below the existing `base`,
// never following a symlink (a tool sharing the directory could plant
// one), owned by uid:gid. Returns "" or what failed.
std::string make_placeholder(const std::string& base, const std::string& path, uid_t uid, gid_t gid,
                             std::vector<std::string>& made) {
    open_how how{};
    how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW;
    how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    int dir = static_cast<int>(::syscall(SYS_openat2, AT_FDCWD, base.c_str(), &how, sizeof how));
    if (dir < 0) return "openat2(" + base + "): " + std::strerror(errno);
    std::string rest = path.substr(base == "/" ? 1 : base.size() + 1);
    std::string done = base;
    while (!rest.empty()) {
        auto slash = rest.find('/');
        std::string name = rest.substr(0, slash);
        rest = slash == std::string::npos ? "" : rest.substr(slash + 1);
        done += (done == "/" ? "" : "/") + name;
        if (::mkdirat(dir, name.c_str(), 0755) == 0) {
            made.push_back(done);
        } else if (errno != EEXIST) {
            std::string e = "mkdir(" + done + "): " + std::strerror(errno);
            ::close(dir);
            return e;
        }
        how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_BENEATH;
        int next = static_cast<int>(::syscall(SYS_openat2, dir, name.c_str(), &how, sizeof how));
        ::close(dir);
        if (next < 0) return "openat2(" + done + "): " + std::strerror(errno);
        dir = next;
        if (::fchownat(dir, "", uid, gid, AT_EMPTY_PATH) != 0) {
            std::string e = "chown(" + done + "): " + std::strerror(errno);
            ::close(dir);
            return e;
        }
    }
    ::close(dir);
    return "";
}

// Placeholders of live runs in this process: path -> (references, the
// directories made for it, deepest last). A run that finds a placeholder
// another run made takes a reference too, so that the first to end does not
// remove an object the other's mask still covers.
struct Placeholders {
    std::mutex mu;
    std::map<std::string, std::pair<int, std::vector<std::string>>> live;
};
Placeholders& placeholders() {
    static Placeholders p;
    return p;
}

// One deny below an allowed subtree -> Mask/Rebind (+ Pins) in the plan.
DenyMaskResult plan_mask(MountPlan& p, const policy::Bundle& bundle, const DenyMaskRequest& d, uid_t uid, gid_t gid,
                         std::vector<MountEntry>& masks) {
    DenyMaskResult res{d.rule_id, false, {}, {}};
    auto held = [&](std::string how) {
        res.held = true;
        res.how = std::move(how);
        return res;
    };
    if (d.path.empty() || d.path[0] != '/') return res.how = "not an absolute path: " + d.path, res;
    // Outside every bind of the view, the tool meets no host object at that
    // path, except below the directories the sandbox builds for itself.
    auto outside_view = [&](const std::string& p, std::string how) {
        for (const char* own : {"/proc", "/sys", "/dev", "/tmp"})
            if (under(p, own)) {
                res.how = std::string("below ") + own + ", which the sandbox builds for itself: not masked";
                return res;
            }
        return held(std::move(how));
    };
    struct stat st{};
    std::unique_lock lk(placeholders().mu);
    if (auto it = placeholders().live.find(d.path); it != placeholders().live.end()) {
        ++it->second.first;
        res.placeholder = d.path;
    } else if (::lstat(d.path.c_str(), &st) != 0) {
        if (errno != ENOENT && errno != ENOTDIR) return res.how = "lstat(" + d.path + "): " + std::strerror(errno), res;
        // Absent at launch: held if the tool cannot bring anything there.
        std::string a = parent_of(d.path);
        while (a != "/" && ::lstat(a.c_str(), &st) != 0) a = parent_of(a);
        char real[PATH_MAX];
        if (!::realpath(a.c_str(), real)) return res.how = "realpath(" + a + "): " + std::strerror(errno), res;
        const MountEntry* e = view_entry(p.entries, real);
        if (!e) return outside_view(d.path, "absent at launch, below " + a + ", which is not in the sandbox's view");
        if (e->kind == MountEntry::BindRo) return held("absent at launch, below " + a + ", read-only in the sandbox's view");
        if (!(rights_at(bundle, a) & BW_FS_CREATE))
            return held("absent at launch; the tool has no create right in " + a);
        std::vector<std::string> made;
        if (std::string why = make_placeholder(real, std::string(real) + d.path.substr(a.size()), uid, gid, made);
            !why.empty()) {
            for (auto m = made.rbegin(); m != made.rend(); ++m) ::rmdir(m->c_str());
            return res.how = "absent at launch and could not be made: " + why, res;
        }
        placeholders().live[d.path] = {1, std::move(made)};
        res.placeholder = d.path;
        res.created = true;
    }
    lk.unlock();
    char real[PATH_MAX];
    if (!::realpath(d.path.c_str(), real) || ::stat(real, &st) != 0)
        return res.how = "realpath(" + d.path + "): " + std::strerror(errno), res;
    std::string r = real;
    const MountEntry* e = view_entry(p.entries, r);
    if (!e) return outside_view(r, "not in the sandbox's view");
    // Every directory between the bind and the object becomes a mount point
    // of its own: renaming or removing one would carry the mask away.
    for (std::string dir = parent_of(r); dir.size() > e->target.size() && under(dir, e->target); dir = parent_of(dir)) {
        struct stat ds{};
        if (::stat(dir.c_str(), &ds) != 0) return res.how = "stat(" + dir + "): " + std::strerror(errno), res;
        masks.push_back({MountEntry::Pin, "", dir, ds.st_dev, ds.st_ino, 0});
    }
    MountEntry m{MountEntry::Mask, "", r, st.st_dev, st.st_ino, 0};
    std::string how;
    if (d.rights & BW_FS_READ) {
        how = S_ISDIR(st.st_mode) ? "an empty mode-0 read-only tmpfs over " + r : "an empty mode-0 read-only file over " + r;
    } else {
        m.kind = MountEntry::Rebind;
        m.attrs = MOUNT_ATTR_NOSUID;
        if (d.rights & (BW_FS_WRITE | BW_FS_CREATE | BW_FS_REMOVE)) m.attrs |= MOUNT_ATTR_RDONLY, how = "read-only";
        if (d.rights & BW_FS_EXEC) m.attrs |= MOUNT_ATTR_NOEXEC, how += how.empty() ? "noexec" : ", noexec";
        how = r + " bound onto itself " + how;
    }
    masks.push_back(std::move(m));
    if (!res.placeholder.empty())
        how += " (absent at launch, in a directory the tool may create in: made empty for the run)";
    return held(std::move(how));
}

}  // namespace

void release_placeholders(MountPlan& plan) {
    std::lock_guard lk(placeholders().mu);
    for (auto& m : plan.masks) {
        if (m.placeholder.empty()) continue;
        auto it = placeholders().live.find(m.placeholder);
        m.placeholder.clear();
        if (it == placeholders().live.end() || --it->second.first > 0) continue;
        const auto& made = it->second.second;
        for (auto d = made.rbegin(); d != made.rend(); ++d)
            if (::rmdir(d->c_str()) != 0) break;  // not empty any more: kept
        placeholders().live.erase(it);
    }
}

MountPlan plan_mounts(const policy::Bundle& bundle, const std::string& workdir,
                      const std::vector<DenyMaskRequest>& denies, uid_t uid, gid_t gid, bool host_view) {
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
    if (host_view) {
        // Every top-level directory but the sandbox's own /tmp, /proc, /dev
        // (and /sys, never shown), whole /etc included.
        if (DIR* root = ::opendir("/")) {
            while (dirent* d = ::readdir(root)) {
                std::string t = std::string("/") + d->d_name;
                if (t == "/." || t == "/.." || t == "/tmp" || t == "/proc" || t == "/dev" || t == "/sys") continue;
                if (covered(e, t) || !exists(t, &st) || !S_ISDIR(st.st_mode)) continue;
                e.push_back({MountEntry::BindRo, t, t});
            }
            ::closedir(root);
        }
    } else {
        for (const char* f : kEtcSubset)
            if (exists(f, &st) && !S_ISLNK(st.st_mode)) e.push_back({MountEntry::BindRo, f, f});
    }
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
        if (!exists(path, &st) || S_ISLNK(st.st_mode)) continue;
        if (!(r.allow & ~r.deny)) continue;
        bool rw = (r.allow & ~r.deny) & (BW_FS_WRITE | BW_FS_CREATE | BW_FS_REMOVE);
        // (the host view's read-only directories cover reads, not writes)
        if (covered(e, path) && !(host_view && rw)) continue;
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
    // Masks last, shallow first (a deeper one lands on the shallower's
    // mount); an object is masked or pinned once.
    std::vector<MountEntry> masks;
    for (const auto& d : denies) p.masks.push_back(plan_mask(p, bundle, d, uid, gid, masks));
    std::stable_sort(masks.begin(), masks.end(), [](const MountEntry& a, const MountEntry& b) {
        return a.target.size() != b.target.size() ? a.target.size() < b.target.size() : a.kind > b.kind;
    });
    for (auto& m : masks) {
        bool dup = std::any_of(e.begin(), e.end(), [&](const MountEntry& x) {
            return (x.kind == MountEntry::Mask || x.kind == MountEntry::Rebind || x.kind == MountEntry::Pin) &&
                   x.target == m.target && (x.kind != MountEntry::Pin || m.kind == MountEntry::Pin);
        });
        bool hidden = std::any_of(e.begin(), e.end(), [&](const MountEntry& x) {
            return x.kind == MountEntry::Mask && x.target != m.target && under(m.target, x.target);
        });
        if (!dup && !hidden) e.push_back(std::move(m));
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
                       entries[i].ino, entries[i].attrs});
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
            case MountEntry::Mask:
            case MountEntry::Rebind:
            case MountEntry::Pin: {
                int fd = open_object(op.target, op.dev, op.ino);
                if (fd < 0) FAILRC(fd == -ESTALE ? "masked object changed since the parent checked it" : "openat2(O_PATH)",
                                   op.target, fd);
                struct stat st{};
                if (::fstat(fd, &st) != 0) FAIL("fstat", op.target);
                if (op.kind == MountEntry::Mask) {
                    rc = mask_object(fd, S_ISDIR(st.st_mode));
                } else {
                    int tree = ::open_tree(fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
                    rc = tree < 0 ? -errno : attach_onto(tree, fd, op.attrs, true);
                }
                ::close(fd);
                if (rc) FAILRC(op.kind == MountEntry::Mask ? "fsmount/move_mount (mask)" : "open_tree/move_mount (rebind)",
                               op.target, rc);
                break;
            }
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
