#include "sandbox/landlock.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "bulwark/policy/evaluator.h"
#include "sandbox/launch_child.h"

namespace bulwark {
namespace {

struct RulesetAttr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};
struct __attribute__((packed)) PathBeneathAttr {
    uint64_t allowed_access;
    int32_t parent_fd;
};
struct NetPortAttr {
    uint64_t allowed_access;
    uint64_t port;
};
constexpr int kRulePathBeneath = 1, kRuleNetPort = 2;
constexpr uint32_t kCreateRulesetVersion = 1u << 0;
constexpr uint32_t kRestrictLogNewExecOn = 1u << 1;  // ABI 7

long create_ruleset(const RulesetAttr* a, size_t size, uint32_t flags) {
    return ::syscall(SYS_landlock_create_ruleset, a, size, flags);
}
long add_rule(int fd, int type, const void* attr) {
    return ::syscall(SYS_landlock_add_rule, fd, type, attr, 0);
}

const char* const kFsNames[] = {"execute",   "write_file", "read_file",   "read_dir",
                                "remove_dir", "remove_file", "make_char", "make_dir",
                                "make_reg",  "make_sock",  "make_fifo",   "make_block",
                                "make_sym",  "refer",      "truncate",    "ioctl_dev"};

// Sandbox-private paths (inside the new root) and the rights they get.
struct InnerRule {
    const char* path;
    uint64_t access;
};
constexpr uint64_t kAllFs = (1ull << 16) - 1;
const InnerRule kInner[] = {
    {"/tmp", kAllFs & ~(ll::kMakeChar | ll::kMakeBlock | ll::kExecute | ll::kIoctlDev)},
    {"/proc", ll::kReadFile | ll::kReadDir},
    {"/dev/null", ll::kReadFile | ll::kWriteFile | ll::kTruncate},
    {"/dev/zero", ll::kReadFile | ll::kWriteFile},
    {"/dev/full", ll::kReadFile | ll::kWriteFile},
    {"/dev/random", ll::kReadFile},
    {"/dev/urandom", ll::kReadFile},
    {"/dev", ll::kReadDir},
};

}  // namespace

namespace ll {
uint64_t fs_rights_for_abi(int abi) {
    if (abi <= 0) return 0;
    uint64_t r = (1ull << 13) - 1;
    if (abi >= 2) r |= kRefer;
    if (abi >= 3) r |= kTruncate;
    if (abi >= 5) r |= kIoctlDev;
    return r;
}
uint64_t net_rights_for_abi(int abi) { return abi >= 4 ? (kBindTcp | kConnectTcp) : 0; }
uint64_t scopes_for_abi(int abi) { return abi >= 6 ? (kScopeAbstractUnix | kScopeSignal) : 0; }
std::vector<std::string> fs_right_names(uint64_t rights) {
    std::vector<std::string> out;
    for (int i = 0; i < 64; ++i)
        if (rights & (1ull << i))
            out.push_back(i < 16 ? kFsNames[i] : "fs_bit_" + std::to_string(i));
    return out;
}
}  // namespace ll

int landlock_abi() {
    static const int abi = [] {
        long v = create_ruleset(nullptr, 0, kCreateRulesetVersion);
        return v < 0 ? 0 : static_cast<int>(v);
    }();
    return abi;
}

const std::string& landlock_canary() {
    static const std::string result = []() -> std::string {
        if (landlock_abi() == 0) return "Landlock unavailable";
        int st = run_canary_child(
            [](void*) {
                RulesetAttr attr{ll::kReadFile, 0, 0};
                long fd = create_ruleset(&attr, 8, 0);
                if (fd < 0 || ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
                    ::syscall(SYS_landlock_restrict_self, fd, 0) != 0)
                    ::_exit(2);
                int f = ::open("/proc/self/status", O_RDONLY | O_CLOEXEC);
                ::_exit(f < 0 && errno == EACCES ? 0 : 1);
            },
            nullptr);
        if (st < 0) return std::string("canary child: ") + std::strerror(-st);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return "";
        if (WIFEXITED(st) && WEXITSTATUS(st) == 1) return "canary: a read Landlock had to deny was allowed";
        return "canary: could not install a Landlock ruleset";
    }();
    return result;
}

std::expected<LandlockPrep, SysError> prepare_landlock(const policy::Bundle& bundle,
                                                       int binary_fd, const std::string& workdir,
                                                       std::vector<std::string>& warnings, bool canary) {
    const policy::LandlockPlan& plan = bundle.landlock;
    LandlockPrep prep;
    prep.status.name = "landlock";
    if (plan.handled_fs == 0 && plan.handled_net == 0 && plan.scoped == 0) {
        prep.status.state = LayerState::NotRequested;
        prep.status.detail = "the policy handles no Landlock right";
        return prep;
    }
    int abi = landlock_abi();
    prep.abi = abi;
    if (abi == 0) {
        prep.status.state = LayerState::Unavailable;
        prep.status.detail = "landlock_create_ruleset: kernel has no Landlock (ENOSYS/EOPNOTSUPP)";
        return prep;
    }
    if (const auto& bad = canary ? landlock_canary() : std::string(); !bad.empty()) {
        prep.status.state = LayerState::Unavailable;
        prep.status.detail = bad;
        return prep;
    }
    // Best effort per ABI: drop (and report) what this kernel cannot handle.
    uint64_t fs = plan.handled_fs & ll::fs_rights_for_abi(abi);
    uint64_t net = plan.handled_net & ll::net_rights_for_abi(abi);
    uint64_t scoped = plan.scoped & ll::scopes_for_abi(abi);
    for (const auto& n : ll::fs_right_names(plan.handled_fs & ~fs))
        prep.status.dropped.push_back("fs." + n + " (needs a newer Landlock ABI than " +
                                      std::to_string(abi) + ")");
    if (plan.handled_net & ~net) {
        if (plan.handled_net & ll::kBindTcp & ~net) prep.status.dropped.push_back("net.bind_tcp (ABI < 4)");
        if (plan.handled_net & ll::kConnectTcp & ~net) prep.status.dropped.push_back("net.connect_tcp (ABI < 4)");
    }
    if (plan.scoped & ll::kScopeAbstractUnix & ~scoped)
        prep.status.dropped.push_back("scope.abstract_unix_socket (ABI < 6)");
    if (plan.scoped & ll::kScopeSignal & ~scoped) prep.status.dropped.push_back("scope.signal (ABI < 6)");

    RulesetAttr attr{fs, net, scoped};
    size_t size = abi >= 6 ? sizeof(RulesetAttr) : abi >= 4 ? 16 : 8;
    long fd = create_ruleset(&attr, size, 0);
    if (fd < 0) return std::unexpected(SysError::last("landlock_create_ruleset(abi " + std::to_string(abi) + ")"));
    prep.ruleset.reset(static_cast<int>(fd));
    prep.handled_fs = fs;

    for (const auto& r : plan.paths) {
        uint64_t access = r.access & fs;
        // The kernel opens a program for reading to execute it (open_exec:
        // FMODE_READ | FMODE_EXEC), and Landlock checks read_file on that
        // open: an exec right without read_file could never be used.
        if (access & ll::kExecute) access |= ll::kReadFile & fs;
        if (access == 0) continue;
        // "/" is the sandbox's own root too (a tmpfs the child makes, not the
        // host's root): the child grants it there (landlock_child_apply).
        if (r.path == "/") prep.view_root |= access;
        int pfd = ::open(r.path.c_str(), O_PATH | O_CLOEXEC);
        if (pfd < 0) {
            warnings.push_back("landlock: " + r.path + " (" + policy::describe_rule(bundle, r.rule_id) +
                               ") does not exist as the sandbox is built, and Landlock grants rights on what "
                               "exists: nothing is granted there (for a file the tool makes, grant "
                               "files.create on its directory)");
            continue;
        }
        struct stat st{};
        if (::fstat(pfd, &st) == 0 && !S_ISDIR(st.st_mode)) access &= ll::kFileRights;
        PathBeneathAttr pb{access, pfd};
        long rc = add_rule(prep.ruleset.get(), kRulePathBeneath, &pb);
        int saved = errno;
        ::close(pfd);
        if (rc < 0) {
            errno = saved;
            return std::unexpected(SysError::last("landlock_add_rule(path_beneath " + r.path + ")"));
        }
    }
    if (net)
        for (const auto& p : plan.ports) {
            NetPortAttr np{p.access & net, p.port};
            if (np.allowed_access == 0) continue;
            if (add_rule(prep.ruleset.get(), kRuleNetPort, &np) < 0)
                return std::unexpected(SysError::last("landlock_add_rule(net_port " + std::to_string(p.port) + ")"));
        }
    if (binary_fd >= 0 && (fs & (ll::kExecute | ll::kReadFile))) {
        PathBeneathAttr pb{fs & (ll::kExecute | ll::kReadFile), binary_fd};
        if (add_rule(prep.ruleset.get(), kRulePathBeneath, &pb) < 0)
            return std::unexpected(SysError::last("landlock_add_rule(path_beneath <tool binary>)"));
    }
    if (workdir == "/tmp" || workdir.starts_with("/tmp/")) {
        prep.skip_private_tmp = true;
        prep.status.dropped.push_back("private /tmp: no grant, the workdir " + workdir +
                                      " is mounted below it (a grant on /tmp would cover the workdir)");
    }
    // Landlock logs denials to the kernel audit only until the first execve
    // after landlock_restrict_self unless LOG_NEW_EXEC_ON is set; the tool
    // runs after exactly that execve (docs/kernel-audit.md).
    if (abi >= 7)
        prep.restrict_flags = kRestrictLogNewExecOn;
    else
        prep.status.dropped.push_back("audit of the tool's denials (LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON needs "
                                      "ABI 7, this kernel has " + std::to_string(abi) + ")");
    prep.status.state = LayerState::Enforcing;
    prep.status.detail = "ABI " + std::to_string(abi) + ", " + std::to_string(plan.paths.size()) +
                         " path rules, " + std::to_string(plan.ports.size()) + " port rules" +
                         (scoped ? ", scoped" : "") + ", exec implies read_file, canary denied" +
                         (prep.restrict_flags ? ", denials logged to kernel audit" : "");
    return prep;
}

int landlock_child_apply(const LandlockPrep& prep) {
    if (!prep.ruleset) return 0;
    for (const auto& r : kInner) {
        if (prep.skip_private_tmp && r.path == kInner[0].path) continue;
        uint64_t access = r.access & prep.handled_fs;
        if (access == 0) continue;
        int fd = ::open(r.path, O_PATH | O_CLOEXEC);
        if (fd < 0) continue;  // not part of this sandbox
        PathBeneathAttr pb{access, fd};
        long rc = add_rule(prep.ruleset.get(), kRulePathBeneath, &pb);
        int saved = errno;
        ::close(fd);
        if (rc < 0) return -saved;
    }
    if (uint64_t access = prep.view_root & prep.handled_fs) {
        int fd = ::open("/", O_PATH | O_CLOEXEC);
        if (fd < 0) return -errno;
        PathBeneathAttr pb{access, fd};
        long rc = add_rule(prep.ruleset.get(), kRulePathBeneath, &pb);
        int saved = errno;
        ::close(fd);
        if (rc < 0) return -saved;
    }
    if (::syscall(SYS_landlock_restrict_self, prep.ruleset.get(), prep.restrict_flags) < 0)
        return -errno;
    return 0;
}

}  // namespace bulwark
