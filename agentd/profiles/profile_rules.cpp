#include "profiles/profile_rules.h"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "bulwark/policy/libraries.h"
#include "profiles/run_features.h"

namespace bulwark::profiles {
namespace {

using nlohmann::json;

// A learned item and the learned runs it appeared in.
struct Seen {
    std::string path;  // a file area's directory, a binary, a unix address
    uint64_t runs = 0;
};

// A destination a learned run reached: "<op> tcp 10.0.0.5:443",
// "<op> udp [2001:db8::1]:53 af 10", "<op> unix stream /run/app.sock".
struct Destination {
    uint32_t op = 0;  // BW_NET_CONNECT | BW_NET_BIND | BW_NET_SEND
    bool unix_socket = false;
    std::string unix_address;
    uint8_t proto = 0;  // BW_PROTO_TCP | BW_PROTO_UDP
    std::array<uint8_t, 16> addr{};  // the v6 space (IPv4 mapped)
    bool v4 = false;
    std::string addr_text;
    uint16_t port = 0;
    uint64_t runs = 0;
};

uint32_t op_of(std::string_view name) {
    if (name == "connect") return BW_NET_CONNECT;
    if (name == "bind") return BW_NET_BIND;
    if (name == "sendmsg") return BW_NET_SEND;
    return 0;
}

std::optional<Destination> parse_destination(std::string_view item, uint64_t runs) {
    Destination d;
    d.runs = runs;
    auto sp = item.find(' ');
    if (sp == std::string_view::npos) return std::nullopt;
    d.op = op_of(item.substr(0, sp));
    if (!d.op) return std::nullopt;
    std::string_view rest = item.substr(sp + 1);
    if (rest.starts_with("unix ")) {
        rest.remove_prefix(5);
        auto t = rest.find(' ');
        if (t == std::string_view::npos) return std::nullopt;
        d.unix_socket = true;
        d.unix_address = std::string(rest.substr(t + 1));
        return d;
    }
    if (rest.starts_with("tcp ")) d.proto = BW_PROTO_TCP;
    else if (rest.starts_with("udp ")) d.proto = BW_PROTO_UDP;
    else return std::nullopt;
    rest.remove_prefix(4);
    if (auto af = rest.find(" af "); af != std::string_view::npos) rest = rest.substr(0, af);
    auto colon = rest.rfind(':');
    if (colon == std::string_view::npos) return std::nullopt;
    std::string host(rest.substr(0, colon));
    auto port = rest.substr(colon + 1);
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), d.port);
    if (ec != std::errc() || end != port.data() + port.size()) return std::nullopt;
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
        host = host.substr(1, host.size() - 2);
        if (inet_pton(AF_INET6, host.c_str(), d.addr.data()) != 1) return std::nullopt;
    } else {
        d.v4 = true;
        d.addr[10] = d.addr[11] = 0xff;
        if (inet_pton(AF_INET, host.c_str(), d.addr.data() + 12) != 1) return std::nullopt;
    }
    d.addr_text = host;
    return d;
}

bool in_prefix(const std::array<uint8_t, 16>& a, const std::array<uint8_t, 16>& net, uint8_t prefix) {
    for (uint8_t bit = 0; bit < prefix; ++bit) {
        const uint8_t m = uint8_t(0x80 >> (bit % 8));
        if ((a[bit / 8] & m) != (net[bit / 8] & m)) return false;
    }
    return true;
}

bool net_rule_reaches(const policy::NetRule& r, const Destination& d) {
    return !r.host && (r.op_mask & d.op) && (r.proto_mask & d.proto) && d.port >= r.port_lo && d.port <= r.port_hi &&
           in_prefix(d.addr, r.addr, r.prefix);
}

// What was learned.
struct Learned {
    uint64_t runs = 0;
    std::map<std::string, std::vector<Seen>> areas;  // verb -> areas
    std::vector<Seen> binaries;                       // executed, by path
    std::vector<Destination> destinations;
};

// A learned path as the rules name it: with symlinks resolved on this host
// (the runs record names as the tool spelt them, /lib/... for /usr/lib/...;
// rules are judged on the file itself). A task variable's path stays.
std::string canonical(const std::string& path) {
    if (!path.starts_with('/')) return path;
    std::error_code ec;
    auto c = std::filesystem::weakly_canonical(path, ec);
    return ec ? path : c.string();
}

Learned learned_of(const Profile& p) {
    Learned l;
    l.runs = p.runs();
    using Items = std::map<std::string, uint64_t, std::less<>>;
    auto items = [&](std::string_view feature) -> const Items& {
        static const Items none;
        const ItemStats* s = p.items(feature);
        return s ? s->runs : none;
    };
    for (const auto& [item, n] : items(kFileArea)) {
        auto sp = item.find(' ');
        if (sp != std::string::npos) l.areas[item.substr(0, sp)].push_back({canonical(item.substr(sp + 1)), n});
    }
    for (const auto& [item, n] : items(kExec))
        if (item.starts_with('/') || item.starts_with("${")) l.binaries.push_back({canonical(item), n});
    for (const auto& [item, n] : items(kDestination))
        if (auto d = parse_destination(item, n)) l.destinations.push_back(std::move(*d));
    return l;
}

class Narrower {
public:
    Narrower(const Learned& learned, policy::FlatRuleFile& flat, const policy::Bundle& compiled)
        : l_(learned), flat_(flat), compiled_(compiled) {}

    ProfileRules run();

private:
    const Learned& l_;
    policy::FlatRuleFile& flat_;
    const policy::Bundle& compiled_;
    policy::RuleComments comments_;
    json entries_ = json::array();

    const policy::RuleRef* rule(uint32_t id) const { return id < flat_.rules.size() ? &flat_.rules[id] : nullptr; }
    std::string use(uint64_t runs) const {
        return "used in " + std::to_string(runs) + " of " + std::to_string(l_.runs) + " learned runs";
    }
    // One allow entry's result, with its comment.
    void record(uint32_t id, std::string_view section, std::string_view result, uint64_t runs,
                const std::vector<std::string>& to = {}, std::string note = {}) {
        const policy::RuleRef* r = rule(id);
        json e = {{"section", section}, {"result", result}, {"runs", runs}, {"id", id}};
        if (r) e.update({{"rule", r->loc.text()}, {"text", r->text}});
        if (!to.empty()) e["to"] = to;
        if (!note.empty()) e["note"] = note;
        entries_.push_back(std::move(e));
        if (result == "kept") comments_[id] = note.empty() ? use(runs) : runs ? use(runs) + "; " + note : note;
        else if (result == "narrowed" && r) comments_[id] = "narrowed from `" + r->text + "`: " + use(runs);
    }

    // A path list: each entry kept, narrowed to the learned paths below it,
    // or dropped. `right`: the section's right; `seen`: what reaches it.
    void paths(std::string_view section, std::vector<policy::ast::PathItem>& list, uint32_t right,
               const std::vector<Seen>& seen);
    // One path list of a block: its section, right, and what reaches it.
    struct PathSection {
        std::string_view name;
        std::vector<policy::ast::PathItem>* list;
        uint32_t right;
        const std::vector<Seen>* seen;
    };
    void path_block(std::initializer_list<PathSection> sections);
    void net_items(std::string_view section, std::vector<policy::ast::NetItem>& list, uint32_t op);
    void dns(std::vector<policy::ast::Scalar>& list);
    void unix_addresses(std::string_view section, std::vector<policy::ast::Scalar>& list, uint32_t op);
};

// The rule's normalised path in the compiled bundle.
std::optional<std::string> compiled_path(const policy::Bundle& b, uint32_t rule_id, uint32_t right) {
    for (const auto& f : b.files)
        if (f.rule_id == rule_id && (f.allow & right)) return f.path;
    return std::nullopt;
}

void Narrower::paths(std::string_view section, std::vector<policy::ast::PathItem>& list, uint32_t right,
                     const std::vector<Seen>& seen) {
    std::vector<policy::ast::PathItem> out;
    for (const auto& item : list) {
        // The rule's file as the kernel reaches it (a rule on /bin/sh holds
        // /usr/bin/dash), like the learned paths.
        auto p = compiled_path(compiled_, item.rule_id, right).transform(canonical);
        if (!p) {
            record(item.rule_id, section, "kept", 0, {}, "not judged: no compiled rule of this right");
            out.push_back(item);
            continue;
        }
        uint64_t runs = 0;
        bool above = false;
        std::vector<std::string> below;
        for (const auto& s : seen) {
            if (path_under(*p, s.path)) above = true;
            else if (path_under(s.path, *p)) below.push_back(s.path);
            else continue;
            runs = std::max(runs, s.runs);
        }
        if (above) {
            record(item.rule_id, section, "kept", runs);
            out.push_back(item);
        } else if (!below.empty()) {
            std::sort(below.begin(), below.end());
            below.erase(std::unique(below.begin(), below.end()), below.end());
            record(item.rule_id, section, "narrowed", runs, below);
            for (const auto& b : below) {
                auto n = item;
                n.path.value = b;
                out.push_back(std::move(n));
            }
        } else {
            record(item.rule_id, section, "dropped", 0);
        }
    }
    list = std::move(out);
}

// A block's path lists, each cut by paths(). A block left without an allow
// would lift its restriction (no `files:` rule, no `exec:` list: nothing is
// confined there), never narrow it: its lists are put back as the tool wrote
// them.
void Narrower::path_block(std::initializer_list<PathSection> sections) {
    std::vector<std::vector<policy::ast::PathItem>> before;
    bool had = false, has = false;
    for (const auto& s : sections) {
        before.push_back(*s.list);
        had |= !s.list->empty();
        paths(s.name, *s.list, s.right, *s.seen);
        has |= !s.list->empty();
    }
    if (!had || has) return;
    auto b = before.begin();
    for (const auto& s : sections) *s.list = std::move(*b++);
    auto in_block = [&](const json& e) {
        return std::any_of(sections.begin(), sections.end(), [&](const PathSection& s) { return e["section"] == s.name; });
    };
    for (auto& e : entries_)
        if (in_block(e)) {
            e["result"] = "kept";
            e.erase("to");
            e["note"] = "no entry of its block used: dropping them all would lift the block's restriction";
            comments_[e["id"].get<uint32_t>()] = e["note"].get<std::string>();
        }
}

void Narrower::net_items(std::string_view section, std::vector<policy::ast::NetItem>& list, uint32_t op) {
    std::vector<policy::ast::NetItem> out;
    const bool any = std::any_of(l_.destinations.begin(), l_.destinations.end(),
                                 [&](const Destination& d) { return !d.unix_socket && (d.op & op); });
    for (const auto& item : list) {
        if (item.host) {
            // Resolved per task: the addresses reached cannot be told apart by name.
            if (any) {
                record(item.rule_id, section, "kept", 0, {}, "a host name, resolved per task");
                out.push_back(item);
            } else {
                record(item.rule_id, section, "dropped", 0);
            }
            continue;
        }
        std::map<std::tuple<std::string, uint16_t, uint8_t>, uint64_t> reached;
        for (const auto& d : l_.destinations) {
            if (d.unix_socket || !(d.op & op)) continue;
            for (const auto& r : compiled_.network.rules)
                if (r.rule_id == item.rule_id && r.action == BW_NET_ACTION_ALLOW && net_rule_reaches(r, d)) {
                    auto& n = reached[{d.addr_text + (d.v4 ? "/32" : "/128"), d.port, d.proto}];
                    n = std::max(n, d.runs);
                    break;
                }
        }
        if (reached.empty()) {
            record(item.rule_id, section, "dropped", 0);
            continue;
        }
        std::vector<std::string> to;
        uint64_t runs = 0;
        for (const auto& [key, n] : reached) {
            const auto& [cidr, port, proto] = key;
            policy::ast::NetItem x = item;
            x.cidr = item.cidr.value_or(policy::ast::Scalar{});
            x.cidr->value = cidr;
            x.ports = {policy::ast::Scalar{std::to_string(port), item.span, item.rule_id}};
            x.proto = policy::ast::Scalar{proto == BW_PROTO_TCP ? "tcp" : "udp", item.span, item.rule_id};
            out.push_back(std::move(x));
            to.push_back(cidr + " " + std::to_string(port) + "/" + (proto == BW_PROTO_TCP ? "tcp" : "udp"));
            runs = std::max(runs, n);
        }
        record(item.rule_id, section, "narrowed", runs, to);
    }
    list = std::move(out);
}

void Narrower::dns(std::vector<policy::ast::Scalar>& list) {
    std::vector<policy::ast::Scalar> out;
    for (const auto& s : list) {
        uint64_t runs = 0;
        for (const auto& d : l_.destinations)
            if (!d.unix_socket && d.port == 53 && d.addr_text == s.value) runs = std::max(runs, d.runs);
        record(s.rule_id, "network.dns", runs ? "kept" : "dropped", runs);
        if (runs) out.push_back(s);
    }
    list = std::move(out);
}

void Narrower::unix_addresses(std::string_view section, std::vector<policy::ast::Scalar>& list, uint32_t op) {
    std::vector<policy::ast::Scalar> out;
    for (const auto& s : list) {
        std::string rule_addr = s.value;
        for (const auto& u : compiled_.network.unix_rules)
            if (u.rule_id == s.rule_id) rule_addr = u.address;
        if (rule_addr.starts_with("${")) {
            // The runs' addresses are recorded as the kernel saw them, not
            // with the task's variables.
            record(s.rule_id, section, "kept", 0, {}, "a task variable: judged per task");
            out.push_back(s);
            continue;
        }
        const bool dir = rule_addr.ends_with('/');
        std::map<std::string, uint64_t> reached;
        for (const auto& d : l_.destinations)
            if (d.unix_socket && (d.op & op) &&
                (d.unix_address == rule_addr || (dir && d.unix_address.starts_with(rule_addr))))
                reached[d.unix_address] = std::max(reached[d.unix_address], d.runs);
        uint64_t runs = 0;
        for (const auto& [a, n] : reached) runs = std::max(runs, n);
        if (reached.empty()) {
            record(s.rule_id, section, "dropped", 0);
        } else if (!dir) {
            record(s.rule_id, section, "kept", runs);
            out.push_back(s);
        } else {
            std::vector<std::string> to;
            for (const auto& [a, n] : reached) {
                auto x = s;
                x.value = a;
                out.push_back(std::move(x));
                to.push_back(a);
            }
            record(s.rule_id, section, "narrowed", runs, to);
        }
    }
    list = std::move(out);
}

ProfileRules Narrower::run() {
    auto& f = flat_.ast.files;
    auto areas = [&](const char* verb) {
        auto it = l_.areas.find(verb);
        return it == l_.areas.end() ? std::vector<Seen>{} : it->second;
    };
    // Executing: the binaries run (the tool's own launch among them, under
    // its binaries' paths) and any area executed from.
    std::vector<Seen> executed = areas("exec");
    for (const auto& b : l_.binaries) executed.push_back(b);
    for (const auto& b : flat_.ast.binaries) executed.push_back({canonical(b.path.value), l_.runs});
    // What the kernel and the loader read and map to start each binary run
    // (its interpreter and libraries): before the tool runs a line, so no
    // run records it, and it is used by every run of the binary.
    std::vector<Seen> reads = areas("read");
    std::set<std::string> resolved;  // each binary's closure read once
    for (size_t i = 0, n = executed.size(); i < n; ++i) {
        if (!executed[i].path.starts_with('/') || !resolved.insert(executed[i].path).second) continue;
        auto libs = policy::binary_libraries(executed[i].path, "");
        if (!libs) continue;  // not ELF, or gone: nothing more to keep for it
        for (const auto& lib : *libs) {
            executed.push_back({lib.path, executed[i].runs});
            reads.push_back({lib.path, executed[i].runs});
        }
    }
    const std::vector<Seen> writes = areas("write");
    path_block({{"files.read", &f.read, BW_FS_READ, &reads},
                {"files.write", &f.write, BW_FS_WRITE, &writes},
                {"files.create", &f.create, BW_FS_CREATE, &writes},
                {"files.remove", &f.remove, BW_FS_REMOVE, &writes},
                {"files.exec", &f.exec, BW_FS_EXEC, &executed}});
    path_block({{"exec.allow", &flat_.ast.exec.allow, BW_FS_EXEC, &executed}});
    auto& n = flat_.ast.network;
    if (n.mapping) {
        net_items("network.connect", n.connect, BW_NET_CONNECT);
        net_items("network.bind", n.bind, BW_NET_BIND);
        net_items("network.send", n.send, BW_NET_SEND);
        dns(n.dns);
        // A mapping left with nothing in it says what `none` says.
        if (n.families.empty() && n.netlink.empty() && n.connect.empty() && n.bind.empty() && n.send.empty() &&
            n.deny.empty() && n.dns.empty() && n.unix_connect.empty() && n.unix_send.empty() && n.unix_bind.empty()) {
            n.mapping = false;
            n.mode = policy::ast::Scalar{"none", n.span, n.rule_id};
        }
    }
    unix_addresses("network.unix.connect", n.unix_connect, BW_NET_CONNECT);
    unix_addresses("network.unix.send", n.unix_send, BW_NET_SEND);
    unix_addresses("network.unix.bind", n.unix_bind, BW_NET_BIND);
    ProfileRules out;
    out.text = policy::rule_file_text(flat_.ast, comments_);
    out.entries = std::move(entries_);
    return out;
}

}  // namespace

nlohmann::json ProfileRules::counts() const {
    nlohmann::json c = {{"kept", 0}, {"narrowed", 0}, {"dropped", 0}};
    for (const auto& e : entries) {
        auto& n = c[e["result"].get<std::string>()];
        n = n.get<uint64_t>() + 1;
    }
    return c;
}

ProfileRules profile_rules(const Profile& profile, policy::FlatRuleFile flat, const policy::Bundle& compiled) {
    Learned learned = learned_of(profile);
    Narrower n(learned, flat, compiled);
    auto out = n.run();
    std::string header = "# The narrowest rules within " + profile.tool() + "'s own that cover its behaviour profile: " +
                         std::to_string(profile.runs()) +
                         " learned runs.\n# Written by agentd (GET /v1/profiles/" + profile.tool() +
                         "/rules) from the tool's file with its bases merged in; every deny, the\n"
                         "# binaries, system calls, limits, hardening and environment are the tool's own.\n";
    out.text = header + out.text;
    return out;
}

}  // namespace bulwark::profiles
