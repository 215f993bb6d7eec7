// BpfTables: the bw_policy header, one bw_file_rule per path (rights of the
// same path merged), and the bw_net_rules LPM entries with ancestor
// propagation: every prefix entry carries the ranges of every less specific
// prefix containing it (deny ranges included), so the longest match alone
// decides. Over-capacity is a compile error, never truncation. The tables are
// built by bpf_tables.h, the same functions instantiate() and grants use.
#include "bulwark/policy/bpf_tables.h"
#include "passes.h"

namespace bulwark::policy {
namespace {

bool allows(const SeccompSpec& spec, std::string_view name) {
    return std::any_of(spec.allow.begin(), spec.allow.end(), [&](const SyscallRule& r) { return r.name == name; });
}

// The flags the rules alone do not tell: a present section enforces even
// with nothing left in it, and the seccomp allow-list decides the BPF
// ptrace/mount/bpf denials.
uint32_t section_flags(const CompileContext& ctx) {
    uint32_t flags = 0;
    if (ctx.ast.files.present) flags |= BW_POL_FILES_ENFORCED;
    if (ctx.ast.exec.present) flags |= BW_POL_EXEC_ENFORCED;
    if (!allows(ctx.seccomp, "ptrace")) flags |= BW_POL_DENY_PTRACE;
    if (!allows(ctx.seccomp, "mount")) flags |= BW_POL_DENY_MOUNT;
    if (!allows(ctx.seccomp, "bpf")) flags |= BW_POL_DENY_BPF;
    return flags;
}

void report(CompileContext& ctx, const TableError& e, std::vector<std::string> hints = {}) {
    ast::Span span = e.at_rule == BW_NO_RULE ? ast::Span{{ctx.main_file, 0, 0}, 1} : ctx.span_of(e.at_rule);
    ctx.error(span, e.code, e.message, std::move(hints));
}

void run_emit_bpf(CompileContext& ctx) {
    Bundle& b = ctx.bundle;
    b.bpf.header.flags = section_flags(ctx);
    b.bpf.header = build_policy_header(b);

    b.bpf.files = build_file_entries(b.files);
    if (auto ok = check_file_capacity(b.bpf.files); !ok) report(ctx, ok.error());

    std::vector<UnixRule> unix_rules = b.network.unix_rules;
    std::erase_if(unix_rules, [](const UnixRule& r) { return !path_variable(r.address).empty(); });  // at instantiate
    if (auto u = build_unix_entries(unix_rules); u) b.bpf.unix_sockets = std::move(*u);
    else report(ctx, u.error());

    if (b.network.mode != NetMode::Rules) return;
    std::vector<NetRule> rules = effective_net_rules(b);
    std::erase_if(rules, [](const NetRule& r) { return r.host.has_value(); });  // resolved at instantiate
    auto net = build_net_entries(rules);
    if (net) {
        b.bpf.net = std::move(*net);
        return;
    }
    const TableError& e = net.error();
    if (e.code != "too-many-port-ranges") return report(ctx, e);
    std::vector<std::string> hints;
    for (size_t k = 0; k < e.rule_ids.size() && k < 6; ++k) hints.push_back("contributing: " + ctx.describe(e.rule_ids[k]));
    if (e.rule_ids.size() > 6) hints.push_back("... and " + std::to_string(e.rule_ids.size() - 6) + " more rules");
    hints.push_back("merge adjacent port ranges, or split the prefix");
    report(ctx, e, std::move(hints));
}

}  // namespace

Pass emit_bpf_pass() { return {"emit-bpf", run_emit_bpf, true}; }

}  // namespace bulwark::policy
