// BpfTables: the bw_policy header, one bw_file_rule per path (rights of the
// same path merged), and the bw_net_rules LPM entries with ancestor
// propagation: every prefix entry carries the ranges of every less specific
// prefix containing it (deny ranges included), so the longest match alone
// decides. Over-capacity is a compile error, never truncation.
#include <map>
#include <unordered_map>

#include "passes.h"

namespace bulwark::policy {
namespace {

bool allows(const SeccompSpec& spec, std::string_view name) {
    return std::any_of(spec.allow.begin(), spec.allow.end(), [&](const SyscallRule& r) { return r.name == name; });
}

void emit_header(CompileContext& ctx) {
    auto& h = ctx.bundle.bpf.header;
    const auto& net = ctx.bundle.network;
    h.mode = ctx.bundle.mode == Mode::Audit ? BW_MODE_AUDIT : BW_MODE_ENFORCE;
    h.flags = 0;
    if (ctx.ast.files.present) h.flags |= BW_POL_FILES_ENFORCED;
    if (ctx.ast.exec.present) h.flags |= BW_POL_EXEC_ENFORCED;
    h.flags |= net.mode == NetMode::None ? BW_POL_NET_NONE : net.mode == NetMode::Loopback ? BW_POL_NET_LOOPBACK
                                                                                            : BW_POL_NET_RULES;
    if (!allows(ctx.seccomp, "ptrace")) h.flags |= BW_POL_DENY_PTRACE;
    if (!allows(ctx.seccomp, "mount")) h.flags |= BW_POL_DENY_MOUNT;
    if (!allows(ctx.seccomp, "bpf")) h.flags |= BW_POL_DENY_BPF;
    h.af_allow = net.af_allow;
    h.sock_type_allow = net.sock_type_allow;
}

void emit_files(CompileContext& ctx) {
    auto& out = ctx.bundle.bpf.files;
    std::unordered_map<std::string, size_t> index;
    for (const auto& f : ctx.bundle.files) {
        auto [it, fresh] = index.emplace(f.path, out.size());
        if (fresh) {
            BpfFileEntry e;
            e.path = f.path;
            e.value.allow_rule_id = BW_NO_RULE;
            e.value.deny_rule_id = BW_NO_RULE;
            out.push_back(std::move(e));
        }
        auto& v = out[it->second].value;
        if (f.allow) {
            v.allow |= f.allow;
            if (v.allow_rule_id == BW_NO_RULE) v.allow_rule_id = f.rule_id;
        }
        if (f.deny) {
            v.deny |= f.deny;
            if (v.deny_rule_id == BW_NO_RULE) v.deny_rule_id = f.rule_id;
        }
    }
    if (out.size() > BW_MAX_FILE_RULES)
        ctx.error({{ctx.main_file, 0, 0}, 1}, "too-many-file-rules",
                  "the policy needs " + std::to_string(out.size()) + " file entries; the map holds " +
                      std::to_string(BW_MAX_FILE_RULES));
}

struct PrefixKey {
    std::array<uint8_t, 16> addr;
    uint8_t prefix;
    bool operator==(const PrefixKey&) const = default;
};
struct PrefixHash {
    size_t operator()(const PrefixKey& k) const {
        size_t h = k.prefix;
        for (uint8_t b : k.addr) h = h * 131 + b;
        return h;
    }
};

std::array<uint8_t, 16> masked(std::array<uint8_t, 16> a, unsigned prefix) {
    for (unsigned bit = prefix; bit < 128; ++bit) a[bit / 8] &= uint8_t(~(0x80u >> (bit % 8)));
    return a;
}

void emit_net(CompileContext& ctx) {
    const auto& net = ctx.bundle.network;
    if (net.mode != NetMode::Rules) return;
    // Distinct prefixes, in first-seen order, each with its own ranges.
    std::unordered_map<PrefixKey, size_t, PrefixHash> index;
    std::vector<PrefixKey> prefixes;
    std::vector<std::vector<bw_port_range>> own;
    std::array<bool, 129> lengths{};
    for (const auto& r : net.rules) {
        if (r.host) continue;
        PrefixKey k{masked(r.addr, r.prefix), r.prefix};
        auto [it, fresh] = index.emplace(k, prefixes.size());
        if (fresh) {
            prefixes.push_back(k);
            own.emplace_back();
        }
        lengths[r.prefix] = true;
        bw_port_range pr{};
        pr.lo = r.port_lo;
        pr.hi = r.port_hi;
        pr.proto_mask = r.proto_mask;
        pr.op_mask = r.op_mask;
        pr.action = r.action;
        pr.rule_id = r.rule_id;
        own[it->second].push_back(pr);
    }
    if (prefixes.size() > BW_MAX_NET_RULES) {
        ctx.error({{ctx.main_file, 0, 0}, 1}, "too-many-net-rules",
                  "the policy needs " + std::to_string(prefixes.size()) + " network prefixes; the map holds " +
                      std::to_string(BW_MAX_NET_RULES));
        return;
    }
    std::vector<size_t> order(prefixes.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        if (prefixes[a].prefix != prefixes[b].prefix) return prefixes[a].prefix < prefixes[b].prefix;
        return prefixes[a].addr < prefixes[b].addr;
    });
    auto& out = ctx.bundle.bpf.net;
    for (size_t i : order) {
        const PrefixKey& p = prefixes[i];
        std::vector<bw_port_range> ranges;
        // Every containing prefix (shorter or equal length, same masked address).
        for (unsigned len = 0; len <= p.prefix; ++len) {
            if (!lengths[len]) continue;
            auto it = index.find(PrefixKey{masked(p.addr, len), uint8_t(len)});
            if (it == index.end()) continue;
            for (const auto& r : own[it->second]) ranges.push_back(r);
        }
        // Deny first, then by ports; identical ranges kept once (first rule).
        std::stable_sort(ranges.begin(), ranges.end(), [](const bw_port_range& a, const bw_port_range& b) {
            if (a.action != b.action) return a.action > b.action;
            if (a.lo != b.lo) return a.lo < b.lo;
            if (a.hi != b.hi) return a.hi < b.hi;
            if (a.proto_mask != b.proto_mask) return a.proto_mask < b.proto_mask;
            return a.op_mask < b.op_mask;
        });
        std::vector<bw_port_range> uniq;
        for (const auto& r : ranges) {
            bool dup = !uniq.empty() && uniq.back().action == r.action && uniq.back().lo == r.lo &&
                       uniq.back().hi == r.hi && uniq.back().proto_mask == r.proto_mask &&
                       uniq.back().op_mask == r.op_mask;
            if (!dup) uniq.push_back(r);
        }
        std::string cidr = format_cidr(p.addr, p.prefix);
        if (uniq.size() > BW_PORT_RANGES_MAX) {
            std::vector<uint32_t> ids;
            for (const auto& r : uniq)
                if (std::find(ids.begin(), ids.end(), r.rule_id) == ids.end()) ids.push_back(r.rule_id);
            std::vector<std::string> hints;
            for (size_t k = 0; k < ids.size() && k < 6; ++k) hints.push_back("contributing: " + ctx.describe(ids[k]));
            if (ids.size() > 6) hints.push_back("... and " + std::to_string(ids.size() - 6) + " more rules");
            hints.push_back("merge adjacent port ranges, or split the prefix");
            ctx.error(ctx.span_of(own[i].front().rule_id), "too-many-port-ranges",
                      "network prefix " + cidr + " needs " + std::to_string(uniq.size()) +
                          " port ranges (with those of the prefixes containing it); an entry holds " +
                          std::to_string(BW_PORT_RANGES_MAX),
                      std::move(hints));
            continue;
        }
        BpfNetEntry e{};
        e.key.prefixlen = 32 + p.prefix;
        e.key.policy_id = 0;
        std::copy(p.addr.begin(), p.addr.end(), e.key.addr);
        e.value.count = uint32_t(uniq.size());
        std::copy(uniq.begin(), uniq.end(), e.value.ranges);
        out.push_back(e);
    }
}

void run(CompileContext& ctx) {
    emit_header(ctx);
    emit_files(ctx);
    emit_net(ctx);
}

}  // namespace

Pass emit_bpf_pass() { return {"emit-bpf", run, true}; }

}  // namespace bulwark::policy
