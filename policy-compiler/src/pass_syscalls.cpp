// syscalls: -> SeccompSpec (names checked against known_syscalls(), argument
// conditions, actions and errno values), plus the bundle's summary.
#include <sys/socket.h>

#include <cerrno>
#include <algorithm>
#include <filesystem>

#include "passes.h"

namespace bulwark::policy {
namespace {

const std::vector<std::pair<std::string, int>>& errno_names() {
    static const std::vector<std::pair<std::string, int>> e = {
        {"EPERM", EPERM},   {"ENOENT", ENOENT},   {"EINTR", EINTR},     {"EIO", EIO},
        {"ENXIO", ENXIO},   {"E2BIG", E2BIG},     {"EBADF", EBADF},     {"EAGAIN", EAGAIN},
        {"ENOMEM", ENOMEM}, {"EACCES", EACCES},   {"EFAULT", EFAULT},   {"EBUSY", EBUSY},
        {"EEXIST", EEXIST}, {"ENODEV", ENODEV},   {"EINVAL", EINVAL},   {"ENOSPC", ENOSPC},
        {"EROFS", EROFS},   {"ENOSYS", ENOSYS},   {"EOPNOTSUPP", EOPNOTSUPP}, {"EAFNOSUPPORT", EAFNOSUPPORT},
        {"ECONNREFUSED", ECONNREFUSED}, {"ENETUNREACH", ENETUNREACH}, {"ENOTSUP", ENOTSUP},
        {"EPROTONOSUPPORT", EPROTONOSUPPORT},
    };
    return e;
}

std::optional<uint16_t> parse_errno(CompileContext& ctx, const ast::Scalar& s) {
    for (const auto& [n, v] : errno_names())
        if (n == s.value) return uint16_t(v);
    if (auto v = parse_uint(s.value, 4095); v && *v > 0) return uint16_t(*v);
    std::vector<std::string> names;
    for (const auto& [n, _] : errno_names()) names.push_back(n);
    std::vector<std::string> hints;
    if (auto m = closest_match(s.value, names); !m.empty()) hints.push_back("did you mean \"" + m + "\"?");
    hints.push_back("errno is a name like EPERM or ENOSYS, or a number from 1 to 4095");
    ctx.error(s.span, "bad-errno", "unknown errno \"" + s.value + "\"", std::move(hints));
    return std::nullopt;
}

std::optional<SeccompAction> parse_action(CompileContext& ctx, const ast::Scalar& s) {
    static const std::vector<std::string> names = {"errno", "kill", "log", "trap"};
    if (s.value == "errno") return SeccompAction::Errno;
    if (s.value == "kill") return SeccompAction::Kill;
    if (s.value == "log") return SeccompAction::Log;
    if (s.value == "trap") return SeccompAction::Trap;
    std::vector<std::string> hints;
    if (auto m = closest_match(s.value, names); !m.empty()) hints.push_back("did you mean \"" + m + "\"?");
    hints.push_back("actions: errno, kill, log, trap");
    ctx.error(s.span, "bad-action", "unknown action \"" + s.value + "\"", std::move(hints));
    return std::nullopt;
}

std::expected<uint64_t, std::string> parse_value(std::string_view v) {
    if (v.starts_with("0x") || v.starts_with("0X")) {
        std::string_view hex = v.substr(2);
        if (hex.empty() || hex.size() > 16) return std::unexpected("hex value must have 1 to 16 digits");
        uint64_t out = 0;
        for (char c : hex) {
            int d = std::isdigit(uint8_t(c)) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                                                       : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
            if (d < 0) return std::unexpected("malformed hex value");
            out = out << 4 | uint64_t(d);
        }
        return out;
    }
    return parse_uint(v, UINT64_MAX);
}

bool check_name(CompileContext& ctx, const ast::Scalar& name) {
    if (is_known_syscall(name.value)) return true;
    std::vector<std::string> hints;
    if (auto m = closest_match(name.value, known_syscalls()); !m.empty()) hints.push_back("did you mean \"" + m + "\"?");
    ctx.error(name.span, "unknown-syscall", "unknown syscall \"" + name.value + "\"", std::move(hints));
    return false;
}

// syscalls.architectures: "native" plus the compat ABIs whose calls the
// rules also judge. Entries are deduplicated (a base and its child may both
// write native); a repeat within one file is a warning.
void architectures(CompileContext& ctx, const ast::Syscalls& s, SeccompSpec& spec, SyscallSummary& sum) {
    if (!s.has_architectures) return;
    if (s.architectures.empty()) {
        ctx.error(s.architectures_span, "empty-list", "\"syscalls.architectures\" is empty: no system call could run",
                  {"write architectures: [native] (the default), or [native, i386] to accept i386 calls too"});
        return;
    }
    bool native = false, ok = true;
    std::vector<std::string> known{"native"};
    for (const auto& c : compat_arch_names()) known.push_back(c);
    for (const auto& a : s.architectures) {
        const std::string& v = a.value;
        if (auto dup = std::ranges::find(sum.architectures, v, &std::pair<std::string, uint32_t>::first);
            dup != sum.architectures.end()) {
            const RuleRef* first = ctx.bundle.rule(dup->second);
            if (first && first->loc.file == a.span.loc.file)
                ctx.warning(a.span, "duplicate-rule", "\"" + v + "\" is already listed by " + ctx.describe(dup->second));
            continue;
        }
        if (v == "native") {
            native = true;
        } else if (v == "x32") {
            ctx.error(a.span, "bad-architecture", "x32 system calls are always refused",
                      {"the filter has no x32 rules: each x32 call is answered with the violation action"});
            ok = false;
            continue;
        } else if (std::ranges::find(compat_arch_names(), v) == compat_arch_names().end()) {
            std::vector<std::string> hints;
            if (v == "x86" || v == "ia32" || v == "i486" || v == "i586" || v == "i686" || v == "x86_32")
                hints.push_back("did you mean \"i386\"?");
            else if (v == "x86_64" || v == "x86-64" || v == "amd64" || v == "aarch64" || v == "arm64")
                hints.push_back("the host's own ABI is written \"native\"");
            else if (auto m = closest_match(v, known); !m.empty())
                hints.push_back("did you mean \"" + m + "\"?");
            hints.push_back("architectures: native, i386 (x86_64 hosts), arm (arm64 hosts)");
            ctx.error(a.span, "bad-architecture", "unknown architecture \"" + v + "\"", std::move(hints));
            ok = false;
            continue;
        } else if (std::ranges::find(host_compat_arch_names(), v) == host_compat_arch_names().end()) {
            ctx.warning(a.span, "no-effect",
                        "\"" + v + "\" is not an ABI this host's kernel runs: the entry has no effect here");
        } else {
            spec.compat_arches.push_back(v);
        }
        sum.architectures.emplace_back(v, a.rule_id);
    }
    if (ok && !native)
        ctx.error(s.architectures_span, "missing-native",
                  "\"syscalls.architectures\" does not list native: the tool's own system calls would all be refused",
                  {"list every ABI the filter accepts, the host's own first: architectures: [native, " +
                   s.architectures.front().value + "]"});
}

// on_violation: what a call no rule allows gets (default: kill the process).
void violation(CompileContext& ctx, const ast::Syscalls& s, SeccompSpec& spec, SyscallSummary& sum) {
    if (s.on_violation) {
        const auto& v = *s.on_violation;
        spec.violation_rule_id = v.rule_id;
        if (auto a = parse_action(ctx, v.action)) spec.violation = *a;
        if (v.errno_value) {
            if (spec.violation != SeccompAction::Errno)
                ctx.error(v.errno_value->span, "errno-without-errno-action", "errno is only used with action: errno");
            else if (auto e = parse_errno(ctx, *v.errno_value)) spec.violation_errno = *e;
        }
        if (spec.violation != SeccompAction::Errno) spec.violation_errno = 0;
    }
    sum.violation = spec.violation;
    sum.violation_errno = spec.violation_errno;
}

// baseline: Docker's default, none, or { import: file.json } (a Docker or
// OCI profile next to the rule file or in a rules directory). False when an
// import cannot be used: the pass stops there.
bool baseline(CompileContext& ctx, const ast::Syscalls& s, SeccompSpec& spec, SyscallSummary& sum) {
    if (s.import) {
        std::vector<std::string> dirs;
        if (!ctx.main_dir.empty()) dirs.push_back(ctx.main_dir);
        for (const auto& d : ctx.opts.rules_dirs) dirs.push_back(d);
        const auto& name = s.import->value;
        if (name.empty() || name.find("..") != std::string::npos || name.front() == '/') {
            ctx.error(s.import->span, "bad-import", "import names a file relative to the rules directory, without \"..\"");
            return false;
        }
        std::string found;
        for (const auto& d : dirs) {
            if (look_via(ctx.opts.inputs, Look::Type, d + "/" + name) == "regular") {
                found = d + "/" + name;
                break;
            }
        }
        if (found.empty()) {
            ctx.error(s.import->span, "import-not-found", "seccomp profile \"" + name + "\" not found",
                      {"the file is looked up next to the rule file and in --rules-dir directories"});
            return false;
        }
        auto text = read_text_file(found, ctx.opts.limits.max_file_bytes);
        if (!text) {
            ctx.error(s.import->span, "import-unreadable", text.error());
            return false;
        }
        if (ctx.opts.inputs) ctx.opts.inputs->note(Look::Content, found, *text);
        auto imported = import_seccomp_profile(*text, name);
        if (!imported) {
            ctx.error(s.import->span, "bad-import", "seccomp profile \"" + name + "\": " + imported.error().message);
            return false;
        }
        spec.baseline = SeccompSpec::Baseline::Imported;
        spec.import_name = name;
        spec.imported = std::move(imported->imported);
        sum.baseline = "import:" + name;
    } else if (s.baseline) {
        if (s.baseline->value == "default") spec.baseline = SeccompSpec::Baseline::Default;
        else if (s.baseline->value == "none") {
            spec.baseline = SeccompSpec::Baseline::None;
            sum.baseline = "none";
        } else {
            std::vector<std::string> hints;
            if (auto m = closest_match(s.baseline->value, {"default", "none"}); !m.empty())
                hints.push_back("did you mean \"" + m + "\"?");
            hints.push_back("baseline is default, none or { import: file.json }");
            ctx.error(s.baseline->span, "bad-baseline", "unknown baseline \"" + s.baseline->value + "\"", std::move(hints));
        }
    }
    return true;
}

// One argument condition of an allow rule; nullopt after its diagnostics.
template <typename Arg>
std::optional<SyscallArgCond> arg_condition(CompileContext& ctx, const Arg& a) {
    SyscallArgCond c;
    bool ok = true;
    if (auto i = parse_uint(a.index.value, 5); i) c.index = uint8_t(*i);
    else {
        ctx.error(a.index.span, "bad-arg-index", "argument index must be 0..5");
        ok = false;
    }
    static const std::vector<std::string> ops = {"eq", "ne", "lt", "le", "gt", "ge", "masked_eq"};
    auto it = std::find(ops.begin(), ops.end(), a.op.value);
    if (it == ops.end()) {
        std::vector<std::string> hints;
        if (auto m = closest_match(a.op.value, ops); !m.empty()) hints.push_back("did you mean \"" + m + "\"?");
        hints.push_back("op is one of eq, ne, lt, le, gt, ge, masked_eq");
        ctx.error(a.op.span, "bad-arg-op", "unknown comparison \"" + a.op.value + "\"", std::move(hints));
        ok = false;
    } else {
        c.op = SyscallArgCond::Op(it - ops.begin());
    }
    if (auto v = parse_value(a.value.value); v) c.value = *v;
    else {
        ctx.error(a.value.span, "bad-arg-value", "argument value \"" + a.value.value + "\": " + v.error(),
                  {"values are unsigned 64-bit, decimal or 0x hex"});
        ok = false;
    }
    if (a.mask) {
        if (c.op != SyscallArgCond::Op::MaskedEq) {
            ctx.error(a.mask->span, "mask-without-masked-eq", "mask is only used with op: masked_eq");
            ok = false;
        } else if (auto m = parse_value(a.mask->value); m) {
            c.mask = *m;
        } else {
            ctx.error(a.mask->span, "bad-arg-value", "mask \"" + a.mask->value + "\": " + m.error());
            ok = false;
        }
    } else if (c.op == SyscallArgCond::Op::MaskedEq) {
        ctx.error(a.span, "missing-key", "op: masked_eq needs a mask");
        ok = false;
    }
    if (!ok) return std::nullopt;
    return c;
}

// allow: calls (with argument conditions) the baseline does not already allow.
void allow_rules(CompileContext& ctx, const ast::Syscalls& s, SeccompSpec& spec, SyscallSummary& sum) {
    for (const auto& item : s.allow) {
        if (!check_name(ctx, item.name)) continue;
        SyscallRule r;
        r.name = item.name.value;
        r.action = SeccompAction::Allow;
        r.rule_id = item.rule_id;
        bool ok = true;
        for (const auto& a : item.args) {
            auto c = arg_condition(ctx, a);
            if (!c) ok = false;
            else r.args.push_back(*c);
        }
        if (!ok) continue;
        spec.allow.push_back(std::move(r));
        sum.allow.emplace_back(item.name.value, item.rule_id);
    }
}

// deny: calls refused whatever else allows them, with the violation action
// unless the rule names its own.
void deny_rules(CompileContext& ctx, const ast::Syscalls& s, SeccompSpec& spec, SyscallSummary& sum) {
    for (const auto& item : s.deny) {
        if (!check_name(ctx, item.name)) continue;
        SyscallRule r;
        r.name = item.name.value;
        r.rule_id = item.rule_id;
        r.action = spec.violation;
        r.errno_value = spec.violation_errno;
        if (item.action) {
            auto a = parse_action(ctx, *item.action);
            if (!a) continue;
            r.action = *a;
            r.errno_value = *a == SeccompAction::Errno ? uint16_t(ENOSYS) : 0;
        }
        if (item.errno_value) {
            if (r.action != SeccompAction::Errno) {
                ctx.error(item.errno_value->span, "errno-without-errno-action", "errno is only used with action: errno");
                continue;
            }
            auto e = parse_errno(ctx, *item.errno_value);
            if (!e) continue;
            r.errno_value = *e;
        }
        spec.deny.push_back(std::move(r));
        sum.deny.emplace_back(item.name.value, item.rule_id);
    }
}

// network.families (the network pass ran first): socket(2) and
// socketpair(2) create only these families, on every host (the cgroup
// sock_create program sees inet sockets alone; BPF LSM is not everywhere).
void socket_families(CompileContext& ctx, SeccompSpec& spec) {
    const uint64_t af = ctx.bundle.network.af_allow;
    spec.socket_families.emplace();
    for (int f = 0; f < 64; ++f)
        if ((af >> f) & 1) spec.socket_families->push_back(f);
    const auto& written = ctx.ast.network.families;
    spec.socket_families_rule_id = written.empty() ? ctx.ast.network.rule_id : written.front().rule_id;
    if (const auto& nl = ctx.bundle.network.netlink_allow; nl && ((af >> AF_NETLINK) & 1)) {
        spec.netlink_protocols.emplace();
        for (int p = 0; p < 32; ++p)
            if ((*nl >> p) & 1) spec.netlink_protocols->push_back(p);
        spec.netlink_rule_id = ctx.ast.network.netlink.empty() ? 0 : ctx.ast.network.netlink.front().rule_id;
    }
}

void run_syscalls(CompileContext& ctx) {
    const auto& s = ctx.ast.syscalls;
    SeccompSpec& spec = ctx.seccomp;
    auto& sum = ctx.bundle.syscalls;
    spec = SeccompSpec{};
    sum.baseline = "default";
    violation(ctx, s, spec, sum);
    architectures(ctx, s, spec, sum);
    if (!baseline(ctx, s, spec, sum)) return;
    allow_rules(ctx, s, spec, sum);
    deny_rules(ctx, s, spec, sum);
    socket_families(ctx, spec);
    ctx.seccomp_ready = true;
}

}  // namespace

Pass syscalls_pass() { return {"syscalls", run_syscalls, false}; }

}  // namespace bulwark::policy
