#include "audit/audit_record.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>

#include "bulwark/policy/bundle.h"

namespace bulwark::audit {
namespace {

constexpr std::array<std::string_view, 11> kLayerNames = {
    "none", "bpf_lsm", "sock_addr", "sock_create", "monitor",
    "seccomp", "landlock", "supervisor", "namespace", "cgroup", "sock_unix"};
static_assert(kLayerNames.size() == BW_LAYER_SOCK_UNIX + 1);

constexpr std::array<std::string_view, BW_OP_MAX> kOpNames = {
    "none",       "file_open", "file_create", "file_unlink", "file_rename", "file_link",
    "file_truncate", "exec",   "mmap_exec",   "ptrace",      "signal",      "mount",
    "bpf",        "sock_create", "connect",   "bind",        "sendmsg",     "proc_exec",
    "proc_fork",  "proc_exit", "syscall",     "mkdir",       "file_setattr"};
// Every operation the ABI defines has its name (an array shorter than its
// bound would name the last ones "").
static_assert(std::ranges::none_of(kOpNames, [](std::string_view n) { return n.empty(); }));

constexpr std::array<std::string_view, 4> kDecisionNames = {"allow", "deny", "audit", "observe"};

constexpr std::array<std::string_view, 9> kKindNames = {
    "", "decision", "run_start", "run_exit", "policy_epoch", "gap", "host_status", "finding", "profile"};

int64_t clock_ns(clockid_t c) {
    timespec ts{};
    clock_gettime(c, &ts);
    return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::string bounded_cstr(const char* p, size_t max) {
    return std::string(p, strnlen(p, max));
}

}  // namespace

std::string unix_address_text(std::string_view name, bool abstract) {
    std::string out = abstract ? "@" : "";
    for (unsigned char c : name) {
        if (c >= 0x20 && c < 0x7f && c != '\\') {
            out += char(c);
        } else {
            char b[5];
            std::snprintf(b, sizeof b, "\\x%02x", c);
            out += b;
        }
    }
    return out;
}

int64_t realtime_now_ns() { return clock_ns(CLOCK_REALTIME); }
int64_t boot_to_realtime_offset_ns() { return clock_ns(CLOCK_REALTIME) - clock_ns(CLOCK_BOOTTIME); }

std::string_view kind_name(RecordKind k) {
    auto i = size_t(k);
    return i < kKindNames.size() && i > 0 ? kKindNames[i] : "unknown";
}
std::string_view layer_name(unsigned l) { return l < kLayerNames.size() ? kLayerNames[l] : "unknown"; }
std::string_view op_name(unsigned o) { return o < kOpNames.size() ? kOpNames[o] : "unknown"; }
std::string_view decision_name(unsigned d) {
    return d < kDecisionNames.size() ? kDecisionNames[d] : "unknown";
}

std::optional<RecordKind> parse_kind(std::string_view s) {
    for (size_t i = 1; i < kKindNames.size(); ++i)
        if (kKindNames[i] == s) return RecordKind(i);
    return std::nullopt;
}
std::optional<uint16_t> parse_layer(std::string_view s) {
    for (size_t i = 0; i < kLayerNames.size(); ++i)
        if (kLayerNames[i] == s) return uint16_t(i);
    return std::nullopt;
}
std::optional<uint8_t> parse_decision(std::string_view s) {
    for (size_t i = 0; i < kDecisionNames.size(); ++i)
        if (kDecisionNames[i] == s) return uint8_t(i);
    return std::nullopt;
}

std::string render_object(const bw_event& ev) {
    switch (ev.obj_kind) {
    case BW_OBJ_FILE: {
        std::string p = bounded_cstr(ev.obj.file.path, sizeof ev.obj.file.path);
        if (p.empty())
            p = "inode " + std::to_string(ev.obj.file.dev) + ":" + std::to_string(ev.obj.file.ino);
        return p;
    }
    case BW_OBJ_NET: {
        const auto& n = ev.obj.net;
        std::string proto = n.type == SOCK_STREAM ? "tcp" : n.type == SOCK_DGRAM ? "udp"
                                                                                 : "sock" + std::to_string(n.type);
        char buf[INET6_ADDRSTRLEN] = {};
        static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (std::memcmp(n.addr, kMapped, 12) == 0) {
            inet_ntop(AF_INET, n.addr + 12, buf, sizeof buf);
            return proto + " " + buf + ":" + std::to_string(n.port);
        }
        inet_ntop(AF_INET6, n.addr, buf, sizeof buf);
        return proto + " [" + buf + "]:" + std::to_string(n.port) + " af " + std::to_string(n.family);
    }
    case BW_OBJ_UNIX: {
        const auto& u = ev.obj.unx;
        std::string proto = u.type == SOCK_STREAM ? "stream" : u.type == SOCK_DGRAM ? "dgram"
                            : u.type == SOCK_SEQPACKET ? "seqpacket" : "sock" + std::to_string(u.type);
        size_t n = std::min<size_t>(u.len, sizeof u.name);
        if (u.kind == BW_UNIX_ABSTRACT) return "unix " + proto + " " + unix_address_text(std::string(u.name, n), true);
        if (u.kind == BW_UNIX_PATH) return "unix " + proto + " " + unix_address_text(std::string(u.name, n), false);
        return "unix " + proto + " (unreadable address)";
    }
    case BW_OBJ_PROC:
        return "pid " + std::to_string(ev.obj.proc.target_pid) + " arg " +
               std::to_string(ev.obj.proc.arg);
    default:
        return {};
    }
}

AuditRecord decision_from_event(const bw_event& ev, const RunContext& ctx, int64_t off) {
    AuditRecord r;
    r.kind = RecordKind::Decision;
    r.ts_ns = int64_t(ev.ts_ns) + off;
    r.task_id = ctx.task_id;
    r.run_id = ctx.run_id;
    r.tool = ctx.tool;
    r.policy_version = ev.policy_version;
    r.rule_id = ev.rule_id;
    if (ctx.bundle && ev.rule_id != BW_NO_RULE) {
        if (const auto* rule = ctx.bundle->rule(ev.rule_id)) {
            r.rule_file = rule->loc.file;
            r.rule_line = rule->loc.line;
            r.rule_text = rule->text;
        }
    }
    r.layer = ev.layer;
    r.op = ev.op;
    r.object = render_object(ev);
    r.decision = ev.decision;
    r.err = ev.ret < 0 && ev.ret >= -4095 ? -ev.ret : 0;  // an errno (MAX_ERRNO), never INT_MIN negated
    r.pid = ev.tgid ? ev.tgid : ev.pid;
    r.comm = bounded_cstr(ev.comm, sizeof ev.comm);
    const bool file = ev.obj_kind == BW_OBJ_FILE && ev.obj.file.rights;
    if (file || ctx.container) {
        nlohmann::json d = nlohmann::json::object();
        if (file) d.update({{"rights", ev.obj.file.rights}, {"dev", ev.obj.file.dev}, {"ino", ev.obj.file.ino}});
        if (ctx.container) d["container"] = *ctx.container;
        r.detail = d.dump();
    }
    return r;
}

policy::TaskVars task_vars_of(uint64_t task_id, const std::string& workdir) {
    return policy::task_vars(workdir, "task-" + std::to_string(task_id));
}

std::optional<policy::TaskVars> run_start_vars(const AuditRecord& start) {
    auto d = nlohmann::json::parse(start.detail, nullptr, false);
    if (!d.is_object() || !d.contains("workdir") || !d["workdir"].is_string()) return std::nullopt;
    auto workdir = d["workdir"].get<std::string>();
    if (workdir.empty()) return std::nullopt;
    return task_vars_of(start.task_id, workdir);
}

AuditRecord run_start_record(uint64_t task_id, uint64_t run_id, std::string tool,
                             uint64_t policy_version, const nlohmann::json& detail) {
    AuditRecord r;
    r.kind = RecordKind::RunStart;
    r.ts_ns = realtime_now_ns();
    r.task_id = task_id;
    r.run_id = run_id;
    r.tool = std::move(tool);
    r.policy_version = policy_version;
    r.layer = BW_LAYER_SUPERVISOR;
    r.op = BW_OP_EXEC;
    if (!detail.is_null()) r.detail = detail.dump();
    return r;
}

AuditRecord run_exit_record(uint64_t task_id, uint64_t run_id, std::string tool,
                            std::string_view reason, int code, const nlohmann::json& extra) {
    AuditRecord r;
    r.kind = RecordKind::RunExit;
    r.ts_ns = realtime_now_ns();
    r.task_id = task_id;
    r.run_id = run_id;
    r.tool = std::move(tool);
    r.layer = BW_LAYER_SUPERVISOR;
    r.op = BW_OP_PROC_EXIT;
    nlohmann::json d = extra.is_object() ? extra : nlohmann::json::object();
    d["reason"] = reason;
    d["code"] = code;
    r.detail = d.dump();
    return r;
}

AuditRecord policy_epoch_record(std::string tool, uint64_t policy_version,
                                std::string_view change, const nlohmann::json& detail) {
    AuditRecord r;
    r.kind = RecordKind::PolicyEpoch;
    r.ts_ns = realtime_now_ns();
    r.tool = std::move(tool);
    r.policy_version = policy_version;
    nlohmann::json d = detail.is_object() ? detail : nlohmann::json::object();
    d["change"] = change;
    r.detail = d.dump();
    return r;
}

AuditRecord host_status_record(const nlohmann::json& status) {
    AuditRecord r;
    r.kind = RecordKind::HostStatus;
    r.ts_ns = realtime_now_ns();
    r.detail = status.dump();
    return r;
}

AuditRecord gap_record(std::string_view source, uint64_t count, uint64_t seq) {
    AuditRecord r;
    r.kind = RecordKind::Gap;
    r.ts_ns = realtime_now_ns();
    r.detail = nlohmann::json{{"source", source},
                              {"count", count},
                              {"after_seq", seq ? seq - 1 : 0}}
                   .dump();
    return r;
}

nlohmann::json to_json(const AuditRecord& r) {
    nlohmann::json j{{"seq", r.seq},
                     {"kind", kind_name(r.kind)},
                     {"ts_ns", r.ts_ns}};
    if (r.task_id) j["task_id"] = r.task_id;
    if (r.run_id) j["run_id"] = r.run_id;
    if (!r.tool.empty()) j["tool"] = r.tool;
    if (r.policy_version) j["policy_version"] = r.policy_version;
    if (r.kind == RecordKind::Decision) {
        if (r.rule_id != BW_NO_RULE) {
            j["rule"] = {{"id", r.rule_id}};
            if (!r.rule_file.empty()) {
                j["rule"]["file"] = r.rule_file;
                j["rule"]["line"] = r.rule_line;
                j["rule"]["text"] = r.rule_text;
            }
        } else {
            j["rule"] = nullptr;  // the policy's default decided
        }
        j["decision"] = decision_name(r.decision);
        j["errno"] = r.err;
        j["object"] = r.object;
    }
    if (r.layer != BW_LAYER_NONE || r.kind == RecordKind::Decision) j["layer"] = layer_name(r.layer);
    if (r.op != BW_OP_NONE) j["op"] = op_name(r.op);
    if (r.pid) j["pid"] = r.pid;
    if (!r.comm.empty()) j["comm"] = r.comm;
    if (!r.detail.empty()) {
        auto d = nlohmann::json::parse(r.detail, nullptr, false);
        j["detail"] = d.is_discarded() ? nlohmann::json(r.detail) : d;
    }
    return j;
}

}  // namespace bulwark::audit
