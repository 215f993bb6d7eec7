#include "common.h"

#include <fstream>
#include <iostream>
#include <sstream>

#include "bulwark/policy/values.h"

namespace bulwark::policyc {

using namespace bulwark::policy;

CompileOptions compile_options(const CommonOptions& common) {
    CompileOptions o;
    o.rules_dirs = common.rules_dirs;
    return o;
}

std::expected<Bundle, int> load_policy(const std::string& path, const CommonOptions& common, std::ostream& err) {
    if (path.ends_with(".json")) {
        std::ifstream in(path);
        if (!in) {
            err << path << ": cannot open\n";
            return std::unexpected(2);
        }
        auto j = nlohmann::json::parse(in, nullptr, false);
        if (j.is_discarded()) {
            err << path << ": not valid JSON\n";
            return std::unexpected(2);
        }
        auto b = bundle_from_json(j);
        if (!b) {
            err << path << ": " << b.error() << "\n";
            return std::unexpected(2);
        }
        return *b;
    }
    auto r = compile_file(path, compile_options(common));
    if (!r.ok()) {
        err << render_diagnostics(r);
        return std::unexpected(1);
    }
    return *r.bundle;
}

std::string format_size(uint64_t b) {
    static constexpr std::pair<uint64_t, const char*> units[] = {
        {1ull << 40, "TiB"}, {1ull << 30, "GiB"}, {1ull << 20, "MiB"}, {1ull << 10, "KiB"}};
    for (auto [f, n] : units)
        if (b >= f && b % f == 0) return std::to_string(b / f) + n;
    return std::to_string(b) + "B";
}

std::string format_duration(uint64_t ms) {
    if (ms % 3600000 == 0) return std::to_string(ms / 3600000) + "h";
    if (ms % 60000 == 0) return std::to_string(ms / 60000) + "m";
    if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
    return std::to_string(ms) + "ms";
}

std::string format_net_rule(const NetRule& r) {
    std::string ops;
    if (r.op_mask & BW_NET_CONNECT) ops += "connect";
    if (r.op_mask & BW_NET_BIND) ops += std::string(ops.empty() ? "" : "+") + "bind";
    if (r.op_mask & BW_NET_SEND) ops += std::string(ops.empty() ? "" : "+") + "send";
    std::string proto = r.proto_mask == (BW_PROTO_TCP | BW_PROTO_UDP) ? "tcp+udp"
                        : r.proto_mask == BW_PROTO_TCP               ? "tcp"
                                                                     : "udp";
    std::string dest = r.host ? *r.host : format_cidr(r.addr, r.prefix);
    std::string ports = r.port_lo == 0 && r.port_hi == 65535 ? "all ports"
                        : r.port_lo == r.port_hi ? "port " + std::to_string(r.port_lo)
                                                 : "ports " + std::to_string(r.port_lo) + "-" + std::to_string(r.port_hi);
    return std::string(r.action == BW_NET_ACTION_DENY ? "deny " : "allow ") + ops + " " + proto + " " + dest + " " + ports;
}

std::string family_names(uint64_t af) {
    std::string s;
    for (const auto& [name, num] : socket_families())
        if (af & (uint64_t(1) << num)) s += (s.empty() ? "" : ", ") + name;
    return s.empty() ? "none" : s;
}

std::string action_name(SeccompAction a, uint16_t e) {
    switch (a) {
        case SeccompAction::Allow: return "allow";
        case SeccompAction::Errno: return "errno " + std::to_string(e);
        case SeccompAction::Kill: return "kill";
        case SeccompAction::Log: return "log";
        case SeccompAction::Trap: return "trap";
    }
    return "?";
}

std::string rule_where(const Bundle& b, uint32_t id) {
    const RuleRef* r = b.rule(id);
    if (!r || r->loc.line == 0) return "-";
    return r->loc.file + ":" + std::to_string(r->loc.line);
}

}  // namespace bulwark::policyc
