#pragma once
// The policy bundle: what policyc emits for one tool and every enforcement
// layer consumes. Each entry carries the id of the rule that produced it;
// Bundle::rules maps that id to file:line:col and the rule's source text.
//
// A bundle compiled from a rule file may still hold task variables
// (${workdir}, ${home}, ${tmp}, ${task_id}) in paths; instantiate() resolves
// them when a task is created (see instantiate.h).
#include <linux/filter.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <bulwark_abi.h>

namespace bulwark::policy {

// 2: syscalls.architectures; a compat ABI (i386) is refused unless listed
// (format 1 filters accepted i386 calls under the native rules).
inline constexpr uint32_t kBundleFormat = 2;

struct SourceLoc {
    std::string file;  // as given on the command line / rules dir relative
    uint32_t line = 0; // 1-based
    uint32_t col = 0;  // 1-based
    // "file:line:col", as every message naming a rule says it
    std::string text() const { return file + ":" + std::to_string(line) + ":" + std::to_string(col); }
};

// One source rule (a list item or a scalar setting in a rule file).
struct RuleRef {
    uint32_t id = 0;
    SourceLoc loc;
    std::string text;     // the rule as written, e.g. "files.write: ${workdir}"
    std::string section;  // "files", "network", "syscalls", "exec", "limits", ...
    // `unenforceable: run` on the rule or its file: the tool may start where
    // no layer in force holds this rule (the gap is recorded); by default
    // such a launch is refused (coverage.h).
    bool unenforceable_run = false;
};

enum class Mode : uint8_t { Enforce, Audit };

struct Binary {
    std::string path;                   // absolute
    std::optional<std::string> sha256;  // lowercase hex
    uint32_t rule_id = 0;
};

// A path subtree and its rights (BW_FS_* bits). allow and deny are unions
// over the subtree; deny overrides allow wherever both reach.
struct FileRule {
    std::string path;  // absolute, normalised; may contain ${var}
    uint32_t allow = 0;
    uint32_t deny = 0;
    uint32_t rule_id = 0;
};

// Network rule in the v6 address space (IPv4 as ::ffff:a.b.c.d/96+n).
struct NetRule {
    std::optional<std::string> host;  // DNS name, resolved at instantiate()
    std::array<uint8_t, 16> addr{};   // for CIDR rules
    uint8_t prefix = 0;               // 0..128 within the v6 space
    uint16_t port_lo = 0, port_hi = 65535;
    uint8_t proto_mask = BW_PROTO_TCP | BW_PROTO_UDP;
    uint8_t op_mask = BW_NET_CONNECT;
    uint8_t action = BW_NET_ACTION_ALLOW;
    uint32_t rule_id = 0;
};

enum class NetMode : uint8_t { None, Loopback, Rules };

// A unix socket address a tool may reach (`network.unix`): "/path" one
// pathname socket, "/dir/" every pathname socket below a directory, "@name"
// an abstract name. Paths are absolute and normalised and may start with a
// task variable. Without a rule, a connect or an addressed send to any named
// unix socket is refused; a file grant never implies one.
// The layers that enforce unix rules on a host that has them, as one phrase
// (explanations). Connect and addressed send: the cgroup unix programs and the
// BPF LSM socket hooks, each on its own; bind: the LSM's socket_bind alone (no
// cgroup hook sees a unix bind), Landlock's make_sock per directory for
// pathnames. Landlock's abstract scope refuses every abstract name of another
// domain unless a rule allows an abstract name (then the compiler leaves the
// scope out and says so in landlock.gaps).
inline constexpr const char* kUnixRuleLayers =
    "connect, send: cgroup connect_unix and sendmsg_unix programs (Linux 6.7+), BPF LSM socket hooks, Landlock "
    "abstract scope for abstract names when no rule allows one; bind: BPF LSM socket_bind, Landlock make_sock per "
    "directory";

struct UnixRule {
    std::string address;
    uint32_t op_mask = BW_NET_CONNECT;  // one of BW_NET_CONNECT, BW_NET_SEND, BW_NET_BIND
    uint32_t rule_id = 0;
};

struct NetworkPolicy {
    NetMode mode = NetMode::None;
    std::vector<NetRule> rules;
    uint64_t af_allow = 0;         // bit n: socket family n
    // With netlink in af_allow: the netlink protocols socket(2) may open (bit
    // n: NETLINK_* n, network.netlink); nullopt: every one.
    std::optional<uint32_t> netlink_allow;
    uint32_t sock_type_allow = 0;  // bit n: SOCK_* type n
    std::vector<std::string> dns;  // resolver addresses the tool may query (port 53)
    std::vector<UnixRule> unix_rules;  // in every mode (unix sockets need no IP network)
};

enum class SeccompAction : uint8_t { Allow, Errno, Kill, Log, Trap };

// One compiled seccomp program (libseccomp, all arches it covers in one filter).
struct SeccompPlan {
    std::vector<sock_filter> program;
    std::vector<uint32_t> arches;     // AUDIT_ARCH_* values accepted natively
    SeccompAction default_action = SeccompAction::Errno;
    uint16_t default_errno = 0;
    std::string baseline;             // "default", "none", or the imported file
    // syscall name -> rule that allowed or denied it (for explanations)
    std::vector<std::pair<std::string, uint32_t>> syscall_rules;
};

// The `syscalls:` section as written (after extends), for explanations and
// diffs; the filter itself is SeccompPlan::program.
struct SyscallSummary {
    std::string baseline;                                  // default | none | import:<file>
    std::vector<std::pair<std::string, uint32_t>> allow;   // syscall name -> rule
    std::vector<std::pair<std::string, uint32_t>> deny;
    SeccompAction violation = SeccompAction::Errno;
    uint16_t violation_errno = 0;
    // `architectures` as written (deduplicated): "native" and the compat
    // ABIs accepted ("i386", "arm"), each with its rule; empty: not written,
    // the native ABI alone.
    std::vector<std::pair<std::string, uint32_t>> architectures;
};

struct LandlockPathRule {
    std::string path;      // may contain ${var}
    uint64_t access = 0;   // LANDLOCK_ACCESS_FS_*
    uint32_t rule_id = 0;
};

struct LandlockPortRule {
    uint16_t port = 0;
    uint64_t access = 0;   // LANDLOCK_ACCESS_NET_*
    uint32_t rule_id = 0;
};

struct LandlockPlan {
    uint64_t handled_fs = 0;
    uint64_t handled_net = 0;
    uint64_t scoped = 0;   // LANDLOCK_SCOPE_*
    std::vector<LandlockPathRule> paths;
    std::vector<LandlockPortRule> ports;
    // What the policy asks that Landlock cannot express (enforced by other
    // layers only), one sentence each, naming the rule.
    std::vector<std::string> gaps;
};

struct Limits {
    std::optional<uint64_t> memory_bytes;
    std::optional<uint64_t> pids;
    std::optional<uint32_t> cpu_percent;    // of one CPU
    std::optional<uint64_t> timeout_ms;
    std::optional<uint64_t> output_bytes;   // stdout + stderr captured
    std::optional<uint64_t> file_size_bytes;
    std::optional<uint64_t> open_files;
    std::vector<std::pair<std::string, uint32_t>> rule_ids;  // limit name -> rule
};

// `microvm:`: whether the tool runs in a VM of its own (docs/microvm.md).
// Off: the host sandbox. Preferred: a microVM when this host has a usable
// VMM and guest image, else the host sandbox (the run's report says so).
// Required: a microVM or no run. Confidential (TDX / SEV-SNP / CCA guest)
// implies Required (docs/confidential.md).
enum class MicroVmMode : uint8_t { Off, Preferred, Required };

struct MicroVmPlan {
    MicroVmMode mode = MicroVmMode::Off;
    uint64_t memory_bytes = 256ull << 20;
    uint32_t vcpus = 1;
    bool confidential = false;
    std::vector<std::pair<std::string, uint32_t>> rule_ids;  // key (mode, memory, ...) -> rule
    // The rule behind a key, 0 when the key was not written.
    uint32_t rule_of(std::string_view key) const {
        for (const auto& [k, id] : rule_ids)
            if (k == key) return id;
        return 0;
    }
};

// `profile:`: agentd serve learns what the tool usually does from its
// recorded runs and scores every run against it (docs/profiles.md). Learn:
// the runs recorded before scoring starts. Respond: what a finding does
// besides its record: nothing more (Record), the run's cgroup killed (Stop),
// the task's further runs of the tool refused until a grant update
// (RequireGrant), the tool narrowed for the rest of the task to what its
// profile covers (Narrow: a new epoch, the profile's export intersected with
// the task's grant). A bundle with a profile asks the BPF programs for allowed
// decisions and process events (BW_POL_REPORT_ALLOW, BW_POL_TRACE_PROC).
enum class ProfileResponse : uint8_t { Record, RequireGrant, Stop, Narrow };

struct ProfilePlan {
    bool enabled = false;  // the rule file has a `profile:` block
    uint32_t learn_runs = 20;
    // task_learn: a task's own profile of the tool, scoring once the task has
    // run the tool that many times (0: no task profiles).
    uint32_t task_learn_runs = 0;
    ProfileResponse respond = ProfileResponse::Record;
    std::vector<std::pair<std::string, uint32_t>> rule_ids;  // key (learn, task_learn, respond) -> rule
    uint32_t rule_of(std::string_view key) const {
        for (const auto& [k, id] : rule_ids)
            if (k == key) return id;
        return 0;
    }
};
std::string_view response_name(ProfileResponse r);

enum class MteMode : uint8_t { Off, Async, Sync };
enum class Requirement : uint8_t { Require, Warn };

struct HardeningPlan {
    MteMode mte = MteMode::Off;
    // property name (pie, relro, bind-now, nx, stack-protector, fortify,
    // cet-ibt, cet-shstk, bti, pac) -> require/warn
    std::vector<std::pair<std::string, Requirement>> properties;
    bool disable_store_bypass = false;
    bool disable_indirect_branch = false;
    uint32_t rule_id = 0;
};

struct EnvPlan {
    std::vector<std::string> pass;                            // copied from the caller
    std::vector<std::pair<std::string, std::string>> set;     // may contain ${var}
    bool clear_all = true;                                    // start from an empty env
};

// Exact BPF map contents for one policy slot, in bulwark_abi.h layouts.
// File keys need (dev, ino) of each path, known only on the host at load
// time, so they are carried with their path; the loader stats each path.
struct BpfFileEntry {
    std::string path;
    bw_file_rule value{};
};

struct BpfNetEntry {
    bw_net_key key{};  // policy_id is filled by the loader (slot chosen at load)
    bw_net_rule value{};
};

struct BpfUnixEntry {
    bw_unix_key key{};  // policy_id is filled by the loader
    bw_unix_rule value{};
};

struct BpfTables {
    bw_policy header{};  // version filled by the loader
    std::vector<BpfFileEntry> files;
    std::vector<BpfNetEntry> net;
    std::vector<BpfUnixEntry> unix_sockets;  // bw_unix_rules ("unix" is a GNU C macro)
};

struct Bundle {
    uint32_t format = kBundleFormat;
    std::string tool;
    std::string description;
    std::vector<std::string> extends;   // resolved chain, base first
    std::string hash;                   // sha256 of the canonical JSON, "sha256:<hex>"
    Mode mode = Mode::Enforce;
    std::vector<std::string> mandatory_layers;

    std::vector<Binary> binaries;
    std::vector<FileRule> files;        // includes exec rights from `exec:`
    NetworkPolicy network;
    SeccompPlan seccomp;
    SyscallSummary syscalls;
    LandlockPlan landlock;
    BpfTables bpf;
    Limits limits;
    MicroVmPlan microvm;
    ProfilePlan profile;
    HardeningPlan hardening;
    EnvPlan env;

    std::vector<RuleRef> rules;         // indexed by rule id
    const RuleRef* rule(uint32_t id) const {
        return id < rules.size() ? &rules[id] : nullptr;
    }
};

}  // namespace bulwark::policy
