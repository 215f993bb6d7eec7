// The BPF loader's truth check: a canary process in a cgroup of its own,
// bound to a policy that denies one operation per program, attempts each;
// a program counts as enforcing only when the kernel really refused what it
// was to refuse (and its event arrived). Also removes what a killed
// launcher's check left behind.
#include "bpf/bpf_loader.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <tuple>

#include "lsm.skel.h"
#include "monitor.skel.h"
#include "bpf/ringbuf_reader.h"
#include "sock_addr.skel.h"
#include "sock_unix.skel.h"

namespace bulwark::bpf {
namespace fs = std::filesystem;


namespace {

enum CanaryOp : int { kSockRaw, kConnect4, kConnect6, kSend4, kSend6, kBind4, kBind6, kOpen, kMkdir, kBpf, kKill,
                      kFork, kUnixConnect, kUnixSend, kTruncate, kChmod, kChown, kMknod, kSymlink, kUnlink, kRmdir,
                      kRename, kLink, kMmapExec, kMprotectExec, kPtraceRead, kTraceme, kMount, kUmount, kPivotRoot,
                      kMoveMount, kExec, kOpCount };

// Files and directories of the scratch directory the file canaries act on,
// one per operation (an operation a broken program lets through changes no
// other's target). Made by the loader before the canary runs.
constexpr const char* kScratchFiles[] = {"ft", "fc", "fo", "fu", "fr", "fl", "fm"};
constexpr const char* kScratchDirs[] = {"e", "p", "um"};

struct Expect {
    const char* prog;
    int op;           // CanaryOp, or -1: event only
    uint16_t layer;
    uint16_t bw_op;
    uint16_t family;  // 0: any
};

constexpr Expect kExpect[] = {
    {"bw_connect4", kConnect4, BW_LAYER_SOCK_ADDR, BW_OP_CONNECT, AF_INET},
    {"bw_connect6", kConnect6, BW_LAYER_SOCK_ADDR, BW_OP_CONNECT, AF_INET6},
    {"bw_sendmsg4", kSend4, BW_LAYER_SOCK_ADDR, BW_OP_SENDMSG, AF_INET},
    {"bw_sendmsg6", kSend6, BW_LAYER_SOCK_ADDR, BW_OP_SENDMSG, AF_INET6},
    {"bw_bind4", kBind4, BW_LAYER_SOCK_ADDR, BW_OP_BIND, AF_INET},
    {"bw_bind6", kBind6, BW_LAYER_SOCK_ADDR, BW_OP_BIND, AF_INET6},
    {"bw_sock_create", kSockRaw, BW_LAYER_SOCK_CREATE, BW_OP_SOCK_CREATE, AF_INET},
    {"bw_connect_unix", kUnixConnect, BW_LAYER_SOCK_UNIX, BW_OP_CONNECT, AF_UNIX},
    {"bw_sendmsg_unix", kUnixSend, BW_LAYER_SOCK_UNIX, BW_OP_SENDMSG, AF_UNIX},
    {"bw_file_open", kOpen, BW_LAYER_BPF_LSM, BW_OP_FILE_OPEN, 0},
    {"bw_path_mkdir", kMkdir, BW_LAYER_BPF_LSM, BW_OP_MKDIR, 0},
    {"bw_bpf", kBpf, BW_LAYER_BPF_LSM, BW_OP_BPF, 0},
    {"bw_task_kill", kKill, BW_LAYER_BPF_LSM, BW_OP_SIGNAL, 0},
    {"bw_bprm_check", kExec, BW_LAYER_BPF_LSM, BW_OP_EXEC, 0},
    {"bw_socket_create", kSockRaw, BW_LAYER_BPF_LSM, BW_OP_SOCK_CREATE, AF_INET},
    {"bw_socket_connect", kConnect4, BW_LAYER_BPF_LSM, BW_OP_CONNECT, AF_INET},
    {"bw_socket_bind", kBind4, BW_LAYER_BPF_LSM, BW_OP_BIND, AF_INET},
    {"bw_socket_sendmsg", kSend4, BW_LAYER_BPF_LSM, BW_OP_SENDMSG, AF_INET},
    // Several hooks share an op (FILE_SETATTR: chmod and chown; FILE_CREATE:
    // mknod and symlink; FILE_UNLINK: unlink and rmdir; MMAP_EXEC: mmap and
    // mprotect; PTRACE; MOUNT): the event proves a program of the op denied,
    // each operation's own EPERM (no other layer acts in the canary) that its
    // hook did.
    {"bw_path_truncate", kTruncate, BW_LAYER_BPF_LSM, BW_OP_FILE_TRUNCATE, 0},
    {"bw_path_chmod", kChmod, BW_LAYER_BPF_LSM, BW_OP_FILE_SETATTR, 0},
    {"bw_path_chown", kChown, BW_LAYER_BPF_LSM, BW_OP_FILE_SETATTR, 0},
    {"bw_path_mknod", kMknod, BW_LAYER_BPF_LSM, BW_OP_FILE_CREATE, 0},
    {"bw_path_symlink", kSymlink, BW_LAYER_BPF_LSM, BW_OP_FILE_CREATE, 0},
    {"bw_path_unlink", kUnlink, BW_LAYER_BPF_LSM, BW_OP_FILE_UNLINK, 0},
    {"bw_path_rmdir", kRmdir, BW_LAYER_BPF_LSM, BW_OP_FILE_UNLINK, 0},
    {"bw_path_rename", kRename, BW_LAYER_BPF_LSM, BW_OP_FILE_RENAME, 0},
    {"bw_path_link", kLink, BW_LAYER_BPF_LSM, BW_OP_FILE_LINK, 0},
    {"bw_mmap_file", kMmapExec, BW_LAYER_BPF_LSM, BW_OP_MMAP_EXEC, 0},
    {"bw_file_mprotect", kMprotectExec, BW_LAYER_BPF_LSM, BW_OP_MMAP_EXEC, 0},
    {"bw_ptrace_access", kPtraceRead, BW_LAYER_BPF_LSM, BW_OP_PTRACE, 0},
    {"bw_ptrace_traceme", kTraceme, BW_LAYER_BPF_LSM, BW_OP_PTRACE, 0},
    {"bw_sb_mount", kMount, BW_LAYER_BPF_LSM, BW_OP_MOUNT, 0},
    {"bw_sb_umount", kUmount, BW_LAYER_BPF_LSM, BW_OP_MOUNT, 0},
    {"bw_sb_pivotroot", kPivotRoot, BW_LAYER_BPF_LSM, BW_OP_MOUNT, 0},
    {"bw_move_mount", kMoveMount, BW_LAYER_BPF_LSM, BW_OP_MOUNT, 0},
    {"bw_proc_exit", -1, BW_LAYER_MONITOR, BW_OP_PROC_EXIT, 0},
    {"bw_proc_fork", -1, BW_LAYER_MONITOR, BW_OP_PROC_FORK, 0},
    {"bw_sys_enter", -1, BW_LAYER_MONITOR, BW_OP_SYSCALL, 0},
    {"bw_proc_exec", -1, BW_LAYER_MONITOR, BW_OP_PROC_EXEC, 0},
};

int errno_of(long rc) { return rc < 0 ? errno : 0; }

// The usage counters' canary: a process that joins the watching leaf (its
// policy counts usage) sends one datagram to a socket of its own on
// loopback, in a network namespace of its own (the host's or a guest's
// loopback may be down) and exits. Returns the leaf's counts (read and
// deleted), nullopt when nothing was counted.
std::optional<bw_run_usage> usage_canary(PolicyMaps& maps, int watch_procs_fd, uint64_t watch_cg) {
    if (!maps.start_usage(watch_cg)) return std::nullopt;
    pid_t child = fork();
    if (child < 0) return std::nullopt;
    if (child == 0) {
        if (write(watch_procs_fd, "0", 1) != 1 || unshare(CLONE_NEWNET) != 0) _exit(1);
        int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        ifreq lo{};
        std::strncpy(lo.ifr_name, "lo", IFNAMSIZ - 1);
        if (s < 0 || ioctl(s, SIOCGIFFLAGS, &lo) != 0) _exit(2);
        lo.ifr_flags = static_cast<short>(lo.ifr_flags | IFF_UP);
        if (ioctl(s, SIOCSIFFLAGS, &lo) != 0) _exit(3);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t alen = sizeof a;
        if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
            ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &alen) != 0)
            _exit(4);
        static const char kDatagram[] = "bulwark usage canary";
        _exit(::sendto(s, kDatagram, sizeof kDatagram, 0, reinterpret_cast<sockaddr*>(&a), sizeof a) ==
                      ssize_t(sizeof kDatagram)
                  ? 0
                  : 5);
    }
    int status = 0;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        spdlog::warn("bpf: the usage canary could not send its datagram (status {})", status);
    auto u = maps.take_usage(watch_cg);
    return u ? *u : std::nullopt;
}

// Runs in the forked canary child: joins the canary cgroup, tries one
// operation per program, reports errnos, then tries to exec.
[[noreturn]] void canary_child(int procs_fd, int exec_procs_fd, int watch_procs_fd, int out_fd,
                               const std::string& scratch, const char* exec_path) {
    int res[kOpCount] = {};
    // Before joining the canary cgroup (the policy judges nothing of this):
    // a mount namespace of its own with a tmpfs the umount and move_mount
    // canaries act on (gone with the child), and a descriptor to map.
    const std::string sc = scratch + "/";
    bool own_ns = unshare(CLONE_NEWNS) == 0 && mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
                  mount("canary", (sc + "um").c_str(), "tmpfs", 0, "size=64k") == 0;
    int map_fd = open((sc + "fm").c_str(), O_RDONLY | O_CLOEXEC);
    if (write(procs_fd, "0", 1) != 1) _exit(90);
    int fd = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP);
    res[kSockRaw] = errno_of(fd);
    if (fd >= 0) close(fd);

    sockaddr_in a4{};
    a4.sin_family = AF_INET;
    a4.sin_port = htons(9);
    a4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sockaddr_in6 a6{};
    a6.sin6_family = AF_INET6;
    a6.sin6_port = htons(9);
    a6.sin6_addr = in6addr_loopback;
    auto try_sock = [](int family, auto fn) {
        int s = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (s < 0) return errno;
        int r = fn(s);
        close(s);
        return r;
    };
    res[kConnect4] = try_sock(AF_INET, [&](int s) { return errno_of(connect(s, (sockaddr*)&a4, sizeof a4)); });
    res[kConnect6] = try_sock(AF_INET6, [&](int s) { return errno_of(connect(s, (sockaddr*)&a6, sizeof a6)); });
    res[kSend4] = try_sock(AF_INET, [&](int s) { return errno_of(sendto(s, "x", 1, 0, (sockaddr*)&a4, sizeof a4)); });
    res[kSend6] = try_sock(AF_INET6, [&](int s) { return errno_of(sendto(s, "x", 1, 0, (sockaddr*)&a6, sizeof a6)); });
    sockaddr_in b4 = a4;
    b4.sin_port = 0;
    sockaddr_in6 b6 = a6;
    b6.sin6_port = 0;
    res[kBind4] = try_sock(AF_INET, [&](int s) { return errno_of(bind(s, (sockaddr*)&b4, sizeof b4)); });
    res[kBind6] = try_sock(AF_INET6, [&](int s) { return errno_of(bind(s, (sockaddr*)&b6, sizeof b6)); });
    fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    res[kOpen] = errno_of(fd);
    if (fd >= 0) close(fd);
    res[kMkdir] = errno_of(mkdir((scratch + "/d").c_str(), 0700));
    union bpf_attr attr;
    std::memset(&attr, 0, sizeof attr);
    attr.map_type = BPF_MAP_TYPE_ARRAY;
    attr.key_size = 4;
    attr.value_size = 4;
    attr.max_entries = 1;
    long m = syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof attr);
    res[kBpf] = errno_of(m);
    if (m >= 0) close(static_cast<int>(m));
    res[kKill] = errno_of(kill(1, 0));
    // unix sockets the loader listens on in the scratch directory
    sockaddr_un us{};
    us.sun_family = AF_UNIX;
    std::snprintf(us.sun_path, sizeof us.sun_path, "%s/s", scratch.c_str());
    if (int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0); s < 0) {
        res[kUnixConnect] = errno;
    } else {
        res[kUnixConnect] = errno_of(connect(s, (sockaddr*)&us, sizeof us));
        close(s);
    }
    std::snprintf(us.sun_path, sizeof us.sun_path, "%s/u", scratch.c_str());
    res[kUnixSend] = try_sock(AF_UNIX, [&](int s) { return errno_of(sendto(s, "x", 1, 0, (sockaddr*)&us, sizeof us)); });
    // The path hooks, one scratch object each.
    res[kTruncate] = errno_of(truncate((sc + "ft").c_str(), 0));
    res[kChmod] = errno_of(chmod((sc + "fc").c_str(), 0600));
    res[kChown] = errno_of(chown((sc + "fo").c_str(), 0, 0));
    res[kMknod] = errno_of(mknod((sc + "n").c_str(), S_IFIFO | 0600, 0));
    res[kSymlink] = errno_of(symlink("x", (sc + "l").c_str()));
    res[kUnlink] = errno_of(unlink((sc + "fu").c_str()));
    res[kRmdir] = errno_of(rmdir((sc + "e").c_str()));
    res[kRename] = errno_of(rename((sc + "fr").c_str(), (sc + "fr2").c_str()));
    res[kLink] = errno_of(link((sc + "fl").c_str(), (sc + "fl2").c_str()));
    // Mapping a file executable, and making a readable mapping executable.
    if (map_fd < 0) {
        res[kMmapExec] = res[kMprotectExec] = EBADF;
    } else {
        void* x = mmap(nullptr, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, map_fd, 0);
        res[kMmapExec] = x == MAP_FAILED ? errno : 0;
        if (x != MAP_FAILED) munmap(x, 4096);
        void* r = mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE, map_fd, 0);
        res[kMprotectExec] = r == MAP_FAILED ? 1000 + errno : errno_of(mprotect(r, 4096, PROT_READ | PROT_EXEC));
        if (r != MAP_FAILED) munmap(r, 4096);
    }
    // Another process: a read-mode access check on the parent (kcmp: Yama
    // restricts attach modes only), and PTRACE_TRACEME.
    res[kPtraceRead] = errno_of(syscall(SYS_kcmp, getpid(), getppid(), 0 /* KCMP_FILE */, 0, 0));
    // Mounts: in the child's own namespace (nothing of the host changes even
    // where a program lets them through).
    if (!own_ns) {
        res[kMount] = res[kUmount] = res[kPivotRoot] = res[kMoveMount] = ENOTSUP;
    } else {
        res[kMount] = errno_of(mount("canary", (sc + "p").c_str(), "tmpfs", 0, "size=64k"));
        res[kMoveMount] = errno_of(syscall(SYS_move_mount, AT_FDCWD, (sc + "um").c_str(), AT_FDCWD, (sc + "p").c_str(), 0));
        res[kPivotRoot] = errno_of(syscall(SYS_pivot_root, (sc + "um").c_str(), (sc + "um").c_str()));
        res[kUmount] = errno_of(umount2((sc + "um").c_str(), MNT_DETACH));
    }
    pid_t g = fork();
    if (g == 0) _exit(0);
    res[kFork] = errno_of(g);
    if (g > 0) waitpid(g, nullptr, 0);
    // PTRACE_TRACEME last, with every signal blocked: where it goes through
    // (no BPF LSM holds it) the loader becomes this process's tracer, and a
    // delivered signal (the exec's SIGTRAP among them) would stop it.
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, nullptr);
    res[kTraceme] = errno_of(ptrace(PTRACE_TRACEME, 0, nullptr, nullptr));
    if (write(out_fd, res, sizeof res) != sizeof res) _exit(91);
    // The exec from a leaf whose binding is still in its setup window: the
    // LSM's file_open lets the sandbox's setup through there (the exec
    // target's open among it), so bprm_check_security, which ends that
    // window, is the hook that refuses the exec.
    if (write(exec_procs_fd, "0", 1) != 1) _exit(93);
    char arg0[] = "true";
    char* argv[] = {arg0, nullptr};
    char* envp[] = {nullptr};
    execve(exec_path, argv, envp);
    int e = errno;
    if (write(out_fd, &e, sizeof e) != sizeof e) _exit(92);
    // Refused (the BPF LSM): the exec monitor still needs an exec to see,
    // from a leaf whose policy only watches.
    if (write(watch_procs_fd, "0", 1) == 1) execve(exec_path, argv, envp);
    _exit(0);
}

}  // namespace

size_t remove_stale_canary_leftovers(const std::string& parent) {
    size_t removed = 0;
    auto dead = [](const std::string& name, const std::string& prefix) {
        if (!name.starts_with(prefix)) return false;
        long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
        return pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
    };
    const std::string scratch = fs::path(kCanaryScratchPrefix).filename().string();
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(fs::path(kCanaryScratchPrefix).parent_path(), ec)) {
        std::error_code rec;
        if (dead(e.path().filename().string(), scratch) && fs::remove_all(e.path(), rec) > 0 && !rec) ++removed;
    }
    for (const auto& e : fs::directory_iterator(parent, ec))
        if (dead(e.path().filename().string(), kCanaryCgroupPrefix) && ::rmdir(e.path().c_str()) == 0) ++removed;
    return removed;
}

std::expected<void, SysError> BpfLoader::truth_check() {
    // Three leaves: the canary's own; a sibling for the exec canary, bound in
    // its setup window; and one whose policy only watches, for an exec the
    // monitor must see.
    const std::string canary = parent_path_ + "/" + kCanaryCgroupPrefix + std::to_string(getpid());
    const std::string canary_exec = canary + "x", canary_watch = canary + "w";
    auto cleanup_cg = [&] {
        for (const auto* leaf : {&canary_exec, &canary_watch, &canary}) ::rmdir(leaf->c_str());
    };
    cleanup_cg();  // a leftover of this pid's earlier check
    for (const auto* leaf : {&canary, &canary_exec, &canary_watch})
        if (::mkdir(leaf->c_str(), 0700) != 0)
            return cleanup_cg(), std::unexpected(SysError::last("mkdir(" + *leaf + ")"));
    auto cg = cgroup_id(canary);
    if (!cg) return cleanup_cg(), std::unexpected(cg.error());
    auto cg_exec = cgroup_id(canary_exec);
    if (!cg_exec) return cleanup_cg(), std::unexpected(cg_exec.error());
    auto cg_watch = cgroup_id(canary_watch);
    if (!cg_watch) return cleanup_cg(), std::unexpected(cg_watch.error());
    // Named for this process, so that one killed during its check leaves a
    // directory the next truth check on the host removes.
    if (size_t n = remove_stale_canary_leftovers(parent_path_))
        spdlog::info("bpf: removed {} leftover(s) of truth checks killed before they ended", n);
    std::string tmpl = std::string(kCanaryScratchPrefix) + std::to_string(getpid()) + "-XXXXXX";
    const char* scratch = mkdtemp(tmpl.data());
    if (!scratch) return cleanup_cg(), std::unexpected(SysError::last("mkdtemp(" + tmpl + ")"));
    const std::string scratch_dir = scratch;
    for (const char* f : kScratchFiles) std::ofstream(scratch_dir + "/" + f) << "canary";
    for (const char* d : kScratchDirs) ::mkdir((scratch_dir + "/" + d).c_str(), 0700);
    // What the unix canaries reach: a listening stream socket and a datagram
    // socket (not at "d", which the mkdir canary must find free).
    Fd unix_stream(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)), unix_dgram(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    for (auto [fd, name, listens] : {std::tuple{unix_stream.get(), "/s", true}, std::tuple{unix_dgram.get(), "/u", false}}) {
        sockaddr_un us{};
        us.sun_family = AF_UNIX;
        std::snprintf(us.sun_path, sizeof us.sun_path, "%s%s", scratch, name);
        if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&us), sizeof us) != 0 || (listens && ::listen(fd, 4) != 0))
            spdlog::warn("bpf: unix canary socket {}: {}", us.sun_path, errno_name(errno));
    }

    policy::BpfTables deny_all;
    deny_all.header.mode = BW_MODE_ENFORCE;
    deny_all.header.flags = BW_POL_NET_NONE | BW_POL_FILES_ENFORCED | BW_POL_EXEC_ENFORCED | BW_POL_DENY_PTRACE |
                            BW_POL_DENY_MOUNT | BW_POL_DENY_BPF | BW_POL_TRACE_PROC | BW_POL_TRACE_SYSCALLS;
    // AF_UNIX too: the unix canaries are refused by the unix default deny,
    // not (where the BPF LSM gates families at socket_create) by the family.
    deny_all.header.af_allow = (1ull << AF_INET) | (1ull << AF_INET6) | (1ull << AF_UNIX);
    deny_all.header.sock_type_allow = (1u << SOCK_STREAM) | (1u << SOCK_DGRAM);
    auto loaded = maps_.load(deny_all);
    if (!loaded) return cleanup_cg(), std::unexpected(loaded.error());
    const PolicyHandle h = loaded->handle;
    policy::BpfTables watch_only;
    watch_only.header.mode = BW_MODE_ENFORCE;
    // It counts usage too, and lets a datagram to loopback out (the usage canary's).
    watch_only.header.flags = BW_POL_TRACE_PROC | BW_POL_COUNT_USAGE | BW_POL_NET_LOOPBACK;
    watch_only.header.af_allow = 1ull << AF_INET;
    watch_only.header.sock_type_allow = 1u << SOCK_DGRAM;
    auto watching = maps_.load(watch_only);
    if (!watching) return (void)maps_.free(h.slot), cleanup_cg(), std::unexpected(watching.error());
    const PolicyHandle hw = watching->handle;
    auto finish = [&] {
        (void)maps_.unbind(*cg);
        (void)maps_.unbind(*cg_exec);
        (void)maps_.unbind(*cg_watch);
        (void)maps_.free(h.slot);
        (void)maps_.free(hw.slot);
        cleanup_cg();
        std::error_code ec;
        fs::remove_all(scratch_dir, ec);
    };
    if (auto r = maps_.bind(*cg, h); !r) return finish(), std::unexpected(r.error());
    if (auto r = maps_.bind(*cg_exec, h, 0, 0, BW_BIND_SETUP); !r) return finish(), std::unexpected(r.error());
    if (auto r = maps_.bind(*cg_watch, hw); !r) return finish(), std::unexpected(r.error());

    Fd procs(::open((canary + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC));
    if (!procs) return finish(), std::unexpected(SysError::last("open(" + canary + "/cgroup.procs)"));
    Fd exec_procs(::open((canary_exec + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC));
    if (!exec_procs) return finish(), std::unexpected(SysError::last("open(" + canary_exec + "/cgroup.procs)"));
    Fd watch_procs(::open((canary_watch + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC));
    if (!watch_procs) return finish(), std::unexpected(SysError::last("open(" + canary_watch + "/cgroup.procs)"));
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) return finish(), std::unexpected(SysError::last("pipe2"));
    Fd rd(p[0]), wr(p[1]);
    pid_t child = fork();
    if (child < 0) return finish(), std::unexpected(SysError::last("fork (canary)"));
    if (child == 0) canary_child(procs.get(), exec_procs.get(), watch_procs.get(), wr.get(), scratch_dir,
                                 opts_.canary_exec.c_str());
    wr.reset();
    int res[kOpCount];
    for (int& r : res) r = -1;
    int exec_err = 0;
    ssize_t n = read(rd.get(), res, sizeof res);
    if (n == sizeof res) {
        if (read(rd.get(), &exec_err, sizeof exec_err) != sizeof exec_err) exec_err = 0;  // exec succeeded
        res[kExec] = exec_err;
    }
    // Where PTRACE_TRACEME went through (no BPF LSM holds it), this thread is
    // the child's tracer; the child blocks every signal, so it should never
    // stop; if it does, let it go.
    int status = 0;
    while (waitpid(child, &status, 0) == child && WIFSTOPPED(status))
        ptrace(PTRACE_DETACH, child, nullptr, nullptr);

    const std::optional<bw_run_usage> usage = usage_canary(maps_, watch_procs.get(), *cg_watch);

    std::vector<bw_event> seen;
    auto reader = RingbufReader::create(maps_.events_fd(), [&](const bw_event& e) {
        if (e.cgroup_id == *cg || e.cgroup_id == *cg_exec || e.cgroup_id == *cg_watch)
            seen.push_back(e);
        else if (opts_.foreign_event_sink)
            opts_.foreign_event_sink(e);
    });
    if (!reader) return finish(), std::unexpected(reader.error());
    (void)(*reader)->consume();
    finish();
    if (n != sizeof res)
        return std::unexpected(SysError{"canary child (exit status " + std::to_string(status) + ")", EIO});

    for (auto& ps : programs_) {
        if (ps.state != ProgState::Attached) continue;
        // The egress counter: the canary's datagram counted on its leaf.
        if (ps.name == "bw_egress") {
            if (usage && usage->tx_packets > 0) {
                ps.state = ProgState::Observing;
                ps.reason.clear();
            } else {
                ps.reason = usage ? "canary datagram not counted" : "canary leaf's usage not counted";
            }
            continue;
        }
        const Expect* ex = nullptr;
        for (const auto& e : kExpect)
            if (ps.name == e.prog) ex = &e;
        if (!ex) {
            ps.reason = "no canary for this hook";
            continue;
        }
        bool event = false;
        for (const auto& e : seen)
            if (e.layer == ex->layer && e.op == ex->bw_op && (ex->family == 0 || e.obj.net.family == ex->family) &&
                (ex->op < 0 ? e.decision == BW_DECISION_OBSERVE : e.decision == BW_DECISION_DENY))
                event = true;
        if (ex->op < 0) {
            if (event) {
                ps.state = ProgState::Observing;
                ps.reason.clear();
            } else {
                ps.reason = "canary event not seen";
            }
            continue;
        }
        int err = res[ex->op];
        // Where the BPF LSM is in force, its socket hooks judge a socket's
        // creation, an IP connect, bind or send, and a unix connect or send
        // on the same policy (header, network and unix rules) before the
        // cgroup programs run: the canary's denial by that hook (its event
        // seen) proves the operation refused by this policy.
        bool lsm_first = false;
        if (ex->layer == BW_LAYER_SOCK_UNIX || ex->layer == BW_LAYER_SOCK_ADDR || ex->layer == BW_LAYER_SOCK_CREATE)
            for (const auto& e : seen)
                if (e.layer == BW_LAYER_BPF_LSM && e.op == ex->bw_op &&
                    (ex->family == 0 || e.obj.net.family == ex->family) && e.decision == BW_DECISION_DENY)
                    lsm_first = true;
        if (err == EPERM && event) {
            ps.state = ProgState::Enforcing;
            ps.reason.clear();
        } else if (err == EPERM && lsm_first) {
            ps.state = ProgState::Enforcing;
            ps.reason = "the BPF LSM's socket hook refused the canary first, on the same policy";
        } else if (err == EPERM) {
            ps.reason = "canary denied before this program ran (an earlier hook)";
        } else {
            ps.reason = "canary not denied: " + (err == 0 ? std::string("operation succeeded") : errno_name(err));
        }
    }
    return {};
}

}  // namespace bulwark::bpf
