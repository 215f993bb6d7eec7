// Emitters: BPF file entries, LPM network entries (ancestor propagation,
// checked against a reference evaluator), capacity errors, Landlock plans.
#include "compiler_support.h"

#include "bulwark/policy/landlock_abi.h"

#include <random>

#include "bulwark/policy/values.h"

using namespace bulwark::test;

TEST_CASE("BPF file entries merge the rights of one path", "[compiler][emit]") {
    auto b = require_ok(
        "tool: t\nfiles:\n  read: [/data, /etc]\n  write: [/data/]\n  deny: [{ path: /data, rights: [remove] }]\n"
        "exec: { allow: [/usr/bin/curl] }\n");
    REQUIRE(b.bpf.files.size() == 3);
    const auto& data = b.bpf.files[0];
    CHECK(data.path == "/data");
    CHECK(data.value.allow == (BW_FS_READ | BW_FS_WRITE));
    CHECK(data.value.deny == BW_FS_REMOVE);
    CHECK(data.value.allow_rule_id == b.files[0].rule_id);
    CHECK(b.rule(data.value.deny_rule_id)->text == "files.deny: {path: /data, rights: [remove]}");
    CHECK(b.bpf.files[1].value.deny_rule_id == BW_NO_RULE);
    CHECK(b.bpf.files[2].value.allow == BW_FS_EXEC);
}

namespace {

struct Probe {
    std::array<uint8_t, 16> addr;
    uint16_t port;
    uint8_t proto, op;
};

bool matches(const NetRule& r, const Probe& p) {
    Cidr c{r.addr, r.prefix, false}, a{p.addr, 128, false};
    return cidr_contains(c, a) && p.port >= r.port_lo && p.port <= r.port_hi && (r.proto_mask & p.proto) &&
           (r.op_mask & p.op);
}

// The policy's meaning: deny wins over allow; nothing matching is denied.
bool reference(const Bundle& b, const Probe& p) {
    bool allow = false;
    for (const auto& r : b.network.rules) {
        if (r.host || !matches(r, p)) continue;
        if (r.action == BW_NET_ACTION_DENY) return false;
        allow = true;
    }
    return allow;
}

// What the BPF program does: longest prefix match, then that entry alone.
bool lpm(const Bundle& b, const Probe& p) {
    const BpfNetEntry* best = nullptr;
    for (const auto& e : b.bpf.net) {
        std::array<uint8_t, 16> addr;
        std::copy(std::begin(e.key.addr), std::end(e.key.addr), addr.begin());
        if (!cidr_contains(Cidr{addr, uint8_t(e.key.prefixlen - 32), false}, Cidr{p.addr, 128, false})) continue;
        if (!best || e.key.prefixlen > best->key.prefixlen) best = &e;
    }
    if (!best) return false;
    bool allow = false;
    for (uint32_t i = 0; i < best->value.count; ++i) {
        const auto& r = best->value.ranges[i];
        if (p.port < r.lo || p.port > r.hi || !(r.proto_mask & p.proto) || !(r.op_mask & p.op)) continue;
        if (r.action == BW_NET_ACTION_DENY) return false;
        allow = true;
    }
    return allow;
}

}  // namespace

TEST_CASE("LPM entries carry every containing prefix's ranges", "[compiler][emit]") {
    auto b = require_ok(
        "tool: t\nnetwork:\n  connect:\n    - { cidr: 10.0.0.0/8, ports: [443] }\n"
        "    - { cidr: 10.1.0.0/16, ports: [80] }\n    - { cidr: 0.0.0.0/0, ports: [53], proto: udp }\n"
        "  deny: [{ cidr: 10.1.2.0/24, ports: [443] }]\n");
    REQUIRE(b.bpf.net.size() == 4);
    // Sorted by prefix length: /0, /8, /16, /24 (in the v6 space +96, +32 for policy_id).
    CHECK(b.bpf.net[0].key.prefixlen == 32 + 96);
    CHECK(b.bpf.net[3].key.prefixlen == 32 + 96 + 24);
    const auto& leaf = b.bpf.net[3].value;
    REQUIRE(leaf.count == 4);
    CHECK(leaf.ranges[0].action == BW_NET_ACTION_DENY);  // deny first
    CHECK(leaf.ranges[0].lo == 443);
    CHECK(b.bpf.net[1].value.count == 2);  // /8: its own + /0
}

TEST_CASE("LPM propagation agrees with the rule semantics (randomised)", "[compiler][emit]") {
    std::mt19937 rng(12345);
    for (int round = 0; round < 40; ++round) {
        std::string text = "tool: t\nnetwork:\n  connect:\n";
        std::string deny = "  deny:\n";
        auto cidr = [&](int len) {
            uint32_t a = 0x0a000000u | (rng() & 0x00ffffffu);
            a &= len == 0 ? 0 : ~((1ull << (32 - len)) - 1);
            return std::to_string(a >> 24) + "." + std::to_string((a >> 16) & 255) + "." + std::to_string((a >> 8) & 255) +
                   "." + std::to_string(a & 255) + "/" + std::to_string(len);
        };
        const int lens[] = {8, 12, 16, 20, 24, 28, 32};
        for (int i = 0; i < 5; ++i) {
            int lo = int(rng() % 1000);
            text += "    - { cidr: " + cidr(lens[rng() % 7]) + ", ports: [\"" + std::to_string(lo) + "-" +
                    std::to_string(lo + int(rng() % 50)) + "\"], proto: " + (rng() % 2 ? "tcp" : "any") + " }\n";
        }
        for (int i = 0; i < 2; ++i) {
            int lo = int(rng() % 1000);
            deny += "    - { cidr: " + cidr(lens[rng() % 7]) + ", ports: [\"" + std::to_string(lo) + "-" +
                    std::to_string(lo + 100) + "\"] }\n";
        }
        auto r = compile(text + deny);
        INFO(text + deny);
        INFO(render_diagnostics(r));
        REQUIRE(r.ok());
        const Bundle& b = *r.bundle;
        for (int k = 0; k < 3000; ++k) {
            Probe p{};
            p.addr[10] = p.addr[11] = 0xff;
            // Probe near rule addresses so most probes hit something.
            const auto& rule = b.network.rules[rng() % b.network.rules.size()];
            p.addr = rule.addr;
            uint32_t noise = rng() % 4 == 0 ? rng() : (rng() & 0xff);
            for (int i = 0; i < 4; ++i) p.addr[12 + i] ^= uint8_t(noise >> (8 * (3 - i)));
            p.port = uint16_t(rng() % 1200);
            p.proto = rng() % 2 ? BW_PROTO_TCP : BW_PROTO_UDP;
            p.op = rng() % 3 == 0 ? BW_NET_SEND : BW_NET_CONNECT;
            REQUIRE(reference(b, p) == lpm(b, p));
        }
    }
}

TEST_CASE("more port ranges than an entry holds is an error naming the rules", "[compiler][emit]") {
    std::string text = "tool: t\nnetwork:\n  connect:\n    - { cidr: 10.0.0.0/8, ports: [";
    for (int i = 0; i < 10; ++i) text += std::string(i ? ", " : "") + std::to_string(1000 + i * 10);
    text += "] }\n    - { cidr: 10.1.0.0/16, ports: [";
    for (int i = 0; i < 7; ++i) text += std::string(i ? ", " : "") + std::to_string(2000 + i * 10);
    text += "] }\n";
    auto r = compile(text);
    REQUIRE(has_code(r, "too-many-port-ranges"));
    const auto* d = find_diag(r, "too-many-port-ranges");
    CHECK(d->message == "network prefix 10.1.0.0/16 needs 17 port ranges (with those of the prefixes containing it); "
                        "an entry holds 16");
    CHECK(d->loc.line == 5);
    CHECK(d->hints.at(0).find("test.yaml:4:7") != std::string::npos);
    CHECK(d->hints.at(1).find("test.yaml:5:7") != std::string::npos);
    CHECK_FALSE(r.ok());
    // 16 exactly fits.
    text = "tool: t\nnetwork:\n  connect:\n    - { cidr: 10.0.0.0/8, ports: [";
    for (int i = 0; i < 16; ++i) text += std::string(i ? ", " : "") + std::to_string(1000 + i * 10);
    text += "] }\n";
    CHECK(require_ok(text).bpf.net.at(0).value.count == 16);
}

TEST_CASE("Landlock plan: rights mapping, denies subtracted, gaps", "[compiler][emit]") {
    auto r = compile(
        "tool: t\nfiles:\n  read: [/usr, \"${home}\"]\n  write: [\"${workdir}\"]\n  exec: [/usr/bin/curl]\n"
        "  deny:\n    - \"${home}/.ssh\"\n    - { path: \"${workdir}\", rights: [write] }\n");
    INFO(render_diagnostics(r));
    REQUIRE(r.ok());
    const auto& ll = r.bundle->landlock;
    CHECK((ll.handled_fs & LANDLOCK_ACCESS_FS_MAKE_CHAR));
    CHECK((ll.handled_fs & LANDLOCK_ACCESS_FS_EXECUTE));
    auto find = [&](std::string_view p) -> const LandlockPathRule* {
        for (const auto& x : ll.paths)
            if (x.path == p) return &x;
        return nullptr;
    };
    REQUIRE(find("/usr") != nullptr);
    CHECK(find("/usr")->access == (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR));
    CHECK(find("/usr/bin/curl")->access == LANDLOCK_ACCESS_FS_EXECUTE);
    CHECK(find("${workdir}") == nullptr);  // its only right is denied on the same path
    REQUIRE(ll.gaps.size() == 1);
    CHECK(ll.gaps[0].find("files.deny: ${home}/.ssh") != std::string::npos);
    CHECK(ll.gaps[0].find("denies read below files.read: ${home}") != std::string::npos);
    CHECK(has_code(r, "landlock-gap"));
}

TEST_CASE("Landlock plan: network by port only, with gaps", "[compiler][emit]") {
    auto none = require_ok("tool: t\n");
    CHECK(none.landlock.handled_net == (LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP));
    CHECK(none.landlock.ports.empty());
    CHECK(none.landlock.handled_fs == 0);
    auto b = require_ok(
        "tool: t\nnetwork:\n  connect:\n    - { cidr: 10.0.0.0/8, ports: [443, \"8000-8002\"], proto: tcp }\n"
        "    - { cidr: \"::/0\", ports: [22], proto: tcp }\n  send: [{ cidr: 10.0.0.53/32, ports: [53], proto: udp }]\n");
    CHECK(b.landlock.handled_net == (LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP));
    REQUIRE(b.landlock.ports.size() == 5);
    CHECK(b.landlock.ports[0].port == 22);
    CHECK(b.landlock.ports[0].access == LANDLOCK_ACCESS_NET_CONNECT_TCP);
    REQUIRE(b.landlock.gaps.size() == 2);
    CHECK(b.landlock.gaps[0].find("only the TCP port") != std::string::npos);
    CHECK(b.landlock.gaps[1].find("does not cover UDP") != std::string::npos);
    auto any = require_ok("tool: t\nnetwork: { connect: [{ cidr: 10.0.0.0/8 }] }\n");
    CHECK_FALSE((any.landlock.handled_net & LANDLOCK_ACCESS_NET_CONNECT_TCP));
    CHECK((any.landlock.handled_net & LANDLOCK_ACCESS_NET_BIND_TCP));
}

TEST_CASE("warnings: broad network grants, duplicates, shadowed network and syscall rules", "[compiler][emit]") {
    auto r = compile(
        "tool: t\nnetwork:\n  connect:\n    - { cidr: 0.0.0.0/0, ports: [443] }\n    - { cidr: 10.1.0.0/16, ports: [80] }\n"
        "    - { cidr: 10.1.0.0/16, ports: [80] }\n  deny: [{ cidr: 10.0.0.0/8 }]\n"
        "syscalls: { allow: [ptrace], deny: [ptrace] }\nfiles: { read: [/etc, /etc] }\n");
    INFO(render_diagnostics(r));
    CHECK(r.ok());
    CHECK(count_code(r, "broad-grant") == 1);
    CHECK(count_code(r, "duplicate-rule") == 2);
    CHECK(count_code(r, "shadowed-rule") == 3);
    CompileOptions o = options();
    o.warnings_as_errors = true;
    CHECK_FALSE(compile_string("tool: t\nfiles: { write: [/] }\n", "t.yaml", o).ok());
}

TEST_CASE("IPv6 prefixes that contain the v4-mapped range are flagged", "[compiler][emit]") {
    auto r = compile("tool: t\nnetwork: { connect: [{ cidr: \"::/64\", ports: [443] }, { cidr: \"::/0\", ports: [22] }] }\n");
    CHECK(r.ok());
    CHECK(count_code(r, "covers-ipv4") == 1);
    REQUIRE(count_code(r, "broad-grant") == 1);
    CHECK(find_diag(r, "broad-grant")->message == "this rule reaches every IPv6 and IPv4 (v4-mapped) address");
    // The v4 probe really is decided by the v6 entry.
    const auto& net = r.bundle->bpf.net;
    CHECK(std::any_of(net.begin(), net.end(), [](const BpfNetEntry& e) { return e.key.prefixlen == 32 + 64; }));
    auto clean = compile("tool: t\nnetwork: { connect: [{ cidr: \"2001:db8::/32\", ports: [443] }] }\n");
    CHECK(count_code(clean, "covers-ipv4") == 0);
}

TEST_CASE("capacity: a policy past the map's size fails, never truncates", "[compiler][emit]") {
    std::string text = "tool: t\nfiles:\n  read:\n";
    text.reserve(70000 * 12);
    for (int i = 0; i <= BW_MAX_FILE_RULES; ++i) text += "    - /f" + std::to_string(i) + "\n";
    auto r = compile(text);
    CHECK(has_code(r, "too-many-file-rules"));
    CHECK_FALSE(r.ok());
}
