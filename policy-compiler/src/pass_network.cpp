// network: -> NetworkPolicy. CIDRs go to the v6 space (IPv4 as
// ::ffff:0:0/96 + n), ports to ranges, proto/op to masks, family names to
// AF numbers. Host names stay as NetRule::host (resolved at instantiate()).
#include <sys/socket.h>

#include <optional>

#include "bulwark/policy/bpf_tables.h"
#include "passes.h"

namespace bulwark::policy {

const std::vector<std::pair<std::string, int>>& socket_families() {
    static const std::vector<std::pair<std::string, int>> fams = {
        {"unix", AF_UNIX},        {"inet", AF_INET},         {"ax25", AF_AX25},         {"ipx", AF_IPX},
        {"appletalk", AF_APPLETALK}, {"netrom", AF_NETROM}, {"bridge", AF_BRIDGE},     {"atmpvc", AF_ATMPVC},
        {"x25", AF_X25},          {"inet6", AF_INET6},       {"rose", AF_ROSE},         {"decnet", AF_DECnet},
        {"netbeui", AF_NETBEUI},  {"security", AF_SECURITY}, {"key", AF_KEY},           {"netlink", AF_NETLINK},
        {"packet", AF_PACKET},    {"ash", AF_ASH},           {"econet", AF_ECONET},     {"atmsvc", AF_ATMSVC},
        {"rds", AF_RDS},          {"sna", AF_SNA},           {"irda", AF_IRDA},         {"pppox", AF_PPPOX},
        {"wanpipe", AF_WANPIPE},  {"llc", AF_LLC},           {"ib", AF_IB},             {"mpls", AF_MPLS},
        {"can", AF_CAN},          {"tipc", AF_TIPC},         {"bluetooth", AF_BLUETOOTH}, {"iucv", AF_IUCV},
        {"rxrpc", AF_RXRPC},      {"isdn", AF_ISDN},         {"phonet", AF_PHONET},     {"ieee802154", AF_IEEE802154},
        {"caif", AF_CAIF},        {"alg", AF_ALG},           {"nfc", AF_NFC},           {"vsock", AF_VSOCK},
        {"kcm", AF_KCM},          {"qipcrtr", AF_QIPCRTR},   {"smc", AF_SMC},           {"xdp", 44},
        {"mctp", 45},
    };
    return fams;
}

const std::vector<std::pair<std::string, int>>& netlink_protocols() {
    // linux/netlink.h (NETLINK_* numbers are ABI)
    static const std::vector<std::pair<std::string, int>> protos = {
        {"route", 0},         {"usersock", 2},   {"firewall", 3},  {"sock_diag", 4},      {"nflog", 5},
        {"xfrm", 6},          {"selinux", 7},    {"iscsi", 8},     {"audit", 9},          {"fib_lookup", 10},
        {"connector", 11},    {"netfilter", 12}, {"ip6_fw", 13},   {"dnrtmsg", 14},       {"kobject_uevent", 15},
        {"generic", 16},      {"scsitransport", 18}, {"ecryptfs", 19}, {"rdma", 20},      {"crypto", 21},
        {"smc", 22},
    };
    return protos;
}

namespace {

constexpr uint64_t bit(int af) { return uint64_t(1) << af; }

// The number `table` gives the name written; an unknown name is an error at
// its entry, with the closest known one.
std::optional<int> named_number(CompileContext& ctx, const ast::Scalar& s,
                                const std::vector<std::pair<std::string, int>>& table, const char* code,
                                const std::string& what) {
    for (const auto& [name, n] : table)
        if (name == s.value) return n;
    std::vector<std::string> names, hints;
    for (const auto& [name, _] : table) names.push_back(name);
    if (auto m = closest_match(s.value, names); !m.empty()) hints.push_back("did you mean \"" + m + "\"?");
    ctx.error(s.span, code, "unknown " + what + " \"" + s.value + "\"", std::move(hints));
    return std::nullopt;
}

// network.netlink: the netlink protocols a tool with the netlink family may
// open; without the list every one is open, which the compiler says.
void netlink_protocol_list(CompileContext& ctx) {
    auto& a = ctx.ast.network;
    auto& net = ctx.bundle.network;
    const bool netlink = net.af_allow & bit(AF_NETLINK);
    if (a.netlink.empty()) {
        auto named = std::find_if(a.families.begin(), a.families.end(),
                                  [](const ast::Scalar& f) { return f.value == "netlink"; });
        if (netlink && named != a.families.end())
            ctx.warning(named->span, "netlink-every-protocol",
                        "network.families lists netlink: every netlink protocol is open to the tool (route, "
                        "sock_diag, xfrm, audit, netfilter, kobject_uevent, generic, ...)",
                        {"list the protocols the tool needs in network.netlink, e.g. netlink: [route]"});
        return;
    }
    if (!netlink) {
        ctx.error(a.netlink.front().span, "family-missing",
                  "network.netlink lists netlink protocols but network.families leaves netlink out",
                  {"add netlink to network.families, or remove network.netlink"});
        return;
    }
    uint32_t allow = 0;
    for (const auto& p : a.netlink)
        if (auto n = named_number(ctx, p, netlink_protocols(), "unknown-netlink-protocol", "netlink protocol"))
            allow |= uint32_t(1) << *n;
    net.netlink_allow = allow;
}

void add_items(CompileContext& ctx, const std::vector<ast::NetItem>& items, uint8_t ops, uint8_t action) {
    auto& net = ctx.bundle.network;
    for (const auto& item : items) {
        uint8_t proto = BW_PROTO_TCP | BW_PROTO_UDP;
        bool ok = true;
        if (item.proto) {
            const auto& p = item.proto->value;
            if (p == "tcp") proto = BW_PROTO_TCP;
            else if (p == "udp") proto = BW_PROTO_UDP;
            else if (p != "any") {
                std::vector<std::string> hints;
                if (auto m = closest_match(p, {"tcp", "udp", "any"}); !m.empty()) hints.push_back("did you mean \"" + m + "\"?");
                hints.push_back("proto is tcp, udp or any");
                ctx.error(item.proto->span, "bad-proto", "unknown protocol \"" + p + "\"", std::move(hints));
                ok = false;
            }
        }
        std::vector<PortRange> ports;
        for (const auto& p : item.ports) {
            auto r = parse_port_range(p.value);
            if (!r) {
                ctx.error(p.span, "bad-port", r.error(), {"ports are numbers 0..65535 or \"lo-hi\" ranges"});
                ok = false;
                continue;
            }
            ports.push_back(*r);
        }
        if (item.ports.empty()) ports.push_back(PortRange{0, 65535});
        NetRule base;
        base.proto_mask = proto;
        base.op_mask = ops;
        base.action = action;
        base.rule_id = item.rule_id;
        if (item.host) {
            auto h = validate_hostname(item.host->value);
            if (!h) {
                ctx.error(item.host->span, "bad-host", h.error());
                ok = false;
            } else {
                base.host = *h;
                base.prefix = 0;
            }
        } else if (item.cidr) {
            auto c = parse_cidr(item.cidr->value);
            if (!c) {
                std::vector<std::string> hints;
                if (c.error().find("host bits") != std::string::npos)
                    hints.push_back("write the network address, or a /32 (/128) for one host");
                ctx.error(item.cidr->span, "bad-cidr", c.error(), std::move(hints));
                ok = false;
            } else {
                base.addr = c->addr;
                base.prefix = c->prefix;
            }
        }
        if (!ok) continue;
        for (const auto& r : ports) {
            NetRule nr = base;
            nr.port_lo = r.lo;
            nr.port_hi = r.hi;
            net.rules.push_back(std::move(nr));
        }
    }
}

// network.unix: addresses as the kernel's cgroup unix programs match them.
void add_unix(CompileContext& ctx, const std::vector<ast::Scalar>& items, uint32_t op) {
    auto& rules = ctx.bundle.network.unix_rules;
    for (const auto& s : items) {
        std::string a = s.value;
        if (a.starts_with("@")) {
            if (a.size() == 1) {
                ctx.error(s.span, "bad-unix-address", "empty abstract name \"@\"", {"write @ and the name, e.g. @my-daemon"});
                continue;
            }
            if (std::any_of(a.begin(), a.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; })) {
                ctx.error(s.span, "bad-unix-address", "control character in abstract name \"" + a + "\"");
                continue;
            }
            if (auto k = unix_rule_key(a); !k) {
                ctx.error(s.span, "bad-unix-address", k.error());
                continue;
            }
        } else {
            const bool dir = a.size() > 1 && a.ends_with("/");
            auto p = normalise_path(a);
            if (!p) {
                std::vector<std::string> hints;
                if (!a.empty() && a.front() != '/' && a.front() != '$')
                    hints.push_back("a socket path is absolute (\"/" + a + "\"), an abstract name starts with @");
                ctx.error(s.span, "bad-path", p.error() + ": \"" + a.substr(0, 80) + (a.size() > 80 ? "...\"" : "\""),
                          std::move(hints));
                continue;
            }
            if (*p == "/") {
                ctx.error(s.span, "unix-too-broad", "\"/\" would allow every pathname socket on the host",
                          {"name the socket (/run/app.sock) or its own directory (/run/app/)"});
                continue;
            }
            a = *p + (dir ? "/" : "");
            if (path_variable(a).empty())
                if (auto k = unix_rule_key(a); !k) {
                    ctx.error(s.span, "bad-unix-address", k.error(), {"the kernel's sun_path holds 108 bytes"});
                    continue;
                }
            if (op == BW_NET_BIND) {
                if (std::string why = unix_bind_uncreatable(ctx.bundle, a); !why.empty()) {
                    ctx.error(s.span, "unix-bind-uncreatable", "the tool could never bind here: " + why,
                              {"a pathname bind creates the socket file: add its directory to files.create",
                               "the sandbox's private /tmp needs no files rule: bind under ${tmp}/"});
                    continue;
                }
            } else if (std::string why = unix_rule_unsound(ctx.bundle, a); !why.empty()) {
                ctx.error(s.span, "unix-rule-unsound", "the rule cannot be held to the socket it names: " + why,
                          {"allow a socket in a directory the tool cannot create or remove in",
                           "the cgroup unix programs judge the address as written, before the kernel resolves it"});
                continue;
            }
        }
        rules.push_back(UnixRule{std::move(a), op, s.rule_id});
    }
}

void run_network(CompileContext& ctx) {
    auto& a = ctx.ast.network;
    auto& net = ctx.bundle.network;
    add_unix(ctx, a.unix_connect, BW_NET_CONNECT);
    add_unix(ctx, a.unix_send, BW_NET_SEND);
    add_unix(ctx, a.unix_bind, BW_NET_BIND);
    // network.unix.unenforceable: run (the tool's own file): every unix rule may run unheld
    if (a.unix_unenforceable)
        for (const auto& u : net.unix_rules)
            if (u.rule_id < ctx.bundle.rules.size()) ctx.bundle.rules[u.rule_id].unenforceable_run = true;
    net.af_allow = bit(AF_UNIX);
    net.sock_type_allow = (1u << SOCK_STREAM) | (1u << SOCK_DGRAM) | (1u << SOCK_SEQPACKET);
    if (!a.present) {
        net.mode = NetMode::None;
        return;
    }
    if (!a.mapping) {
        if (!a.mode) return;
        if (a.mode->value == "none") net.mode = NetMode::None;
        else if (a.mode->value == "loopback") {
            net.mode = NetMode::Loopback;
            net.af_allow |= bit(AF_INET) | bit(AF_INET6);
        } else {
            std::vector<std::string> hints;
            if (auto m = closest_match(a.mode->value, {"none", "loopback"}); !m.empty())
                hints.push_back("did you mean \"" + m + "\"?");
            hints.push_back("network is none, loopback or a mapping of rules");
            ctx.error(a.mode->span, "bad-network", "unknown network mode \"" + a.mode->value + "\"", std::move(hints));
        }
        return;
    }
    net.mode = NetMode::Rules;
    add_items(ctx, a.connect, BW_NET_CONNECT, BW_NET_ACTION_ALLOW);
    add_items(ctx, a.bind, BW_NET_BIND, BW_NET_ACTION_ALLOW);
    add_items(ctx, a.send, BW_NET_SEND, BW_NET_ACTION_ALLOW);
    add_items(ctx, a.deny, BW_NET_CONNECT | BW_NET_BIND | BW_NET_SEND, BW_NET_ACTION_DENY);
    for (const auto& d : a.dns) {
        auto addr = parse_address(d.value);
        if (!addr) {
            ctx.error(d.span, "bad-address", addr.error(), {"dns entries are resolver addresses, e.g. 127.0.0.53"});
            continue;
        }
        std::string shown = format_cidr(addr->addr, addr->prefix);
        shown = shown.substr(0, shown.rfind('/'));
        if (std::find(net.dns.begin(), net.dns.end(), shown) == net.dns.end()) net.dns.push_back(shown);
        NetRule nr;
        nr.addr = addr->addr;
        nr.prefix = 128;
        nr.port_lo = nr.port_hi = 53;
        nr.proto_mask = BW_PROTO_TCP | BW_PROTO_UDP;
        nr.op_mask = BW_NET_CONNECT | BW_NET_SEND;
        nr.rule_id = d.rule_id;
        net.rules.push_back(nr);
    }
    if (a.families.empty()) {
        net.af_allow = bit(AF_UNIX) | bit(AF_INET) | bit(AF_INET6);
    } else {
        net.af_allow = 0;
        for (const auto& f : a.families)
            if (auto n = named_number(ctx, f, socket_families(), "unknown-family", "socket family"))
                net.af_allow |= bit(*n);
    }
    netlink_protocol_list(ctx);
    uint8_t protos = 0;
    for (const auto& r : net.rules)
        if (r.action == BW_NET_ACTION_ALLOW) protos |= r.proto_mask;
    uint32_t types = 0;
    if (net.af_allow & bit(AF_UNIX)) types |= (1u << SOCK_STREAM) | (1u << SOCK_DGRAM) | (1u << SOCK_SEQPACKET);
    if (protos & BW_PROTO_TCP) types |= 1u << SOCK_STREAM;
    if (protos & BW_PROTO_UDP) types |= 1u << SOCK_DGRAM;
    if (net.af_allow & (bit(AF_NETLINK) | bit(AF_PACKET))) types |= (1u << SOCK_RAW) | (1u << SOCK_DGRAM);
    net.sock_type_allow = types;
    bool inet = net.af_allow & (bit(AF_INET) | bit(AF_INET6));
    bool any_allow = std::any_of(net.rules.begin(), net.rules.end(),
                                 [](const NetRule& r) { return r.action == BW_NET_ACTION_ALLOW; });
    if (any_allow && !inet)
        ctx.warning(a.span, "family-missing", "network rules allow addresses but families exclude inet and inet6",
                    {"add inet and/or inet6 to network.families"});
    if (!net.unix_rules.empty() && !(net.af_allow & bit(AF_UNIX)))
        ctx.warning(a.span, "family-missing", "network.unix allows sockets but families exclude unix",
                    {"add unix to network.families"});
}

}  // namespace

Pass network_pass() { return {"network", run_network, false}; }

}  // namespace bulwark::policy
