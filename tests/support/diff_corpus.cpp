#include "diff_corpus.h"

#include <sys/socket.h>

#include <cstdlib>

#include "bulwark/policy/compiler.h"
#include "bulwark/policy/instantiate.h"
#include "bulwark/policy/match.h"
#include "bulwark_abi.h"

namespace bulwark::difftest {

using policy::OpKind;

uint64_t Rng::next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t seed_from_env(const char* var, uint64_t fallback) {
    const char* v = std::getenv(var);
    if (!v || !*v) return fallback;
    char* end = nullptr;
    uint64_t s = std::strtoull(v, &end, 0);
    return (end && *end == '\0') ? s : fallback;
}

Rng policy_rng(uint64_t seed, size_t index) {
    Rng mix(seed ^ (0x5851f42d4c957f2dull * (index + 1)));
    return Rng(mix.next());
}

std::expected<policy::Bundle, std::string> compile_policy(const std::string& text, const std::string& name) {
    policy::CompileOptions opts;
    auto res = policy::compile_string(text, name, opts);
    if (!res.ok()) return std::unexpected(policy::render_diagnostics(res));
    policy::TaskVars vars{{"workdir", "/tmp/bwdiff-work"}, {"home", "/tmp/bwdiff-home"},
                          {"tmp", "/tmp/bwdiff-tmp"}, {"task_id", "diff"}};
    auto inst = policy::instantiate(*res.bundle, vars, [](std::string_view host)
                                        -> std::expected<std::vector<std::string>, std::string> {
        return std::unexpected("the corpus names no hosts (" + std::string(host) + ")");
    });
    if (!inst) return std::unexpected("instantiate: " + inst.error().message);
    return std::move(*inst);
}

// ---------------------------------------------------------------- network

namespace {

const std::vector<std::string> kCidrs = {
    "127.0.0.0/8",  "127.0.0.1/32",  "127.0.0.0/24",  "127.3.0.0/16",     "127.3.4.5/32", "127.0.0.53/32",
    "10.77.0.0/16", "10.77.1.0/24",  "10.77.1.2/32",  "10.0.0.0/8",       "0.0.0.0/0",    "0.0.0.0/32",
    "::1/128",      "::/0",          "fd00:77::/32",  "fd00:77:1::/48",   "fd00:77:1::2/128",
    "::/128",       "fd00::/8",      "2001:db8::/32",
};

const std::vector<std::string> kV4Targets = {"127.0.0.1", "127.0.0.2",  "127.3.4.5", "127.0.0.53",
                                             "10.77.0.1", "10.77.1.2",  "10.77.9.9", "0.0.0.0"};
const std::vector<std::string> kV6Targets = {"::1",          "fd00:77::1",      "fd00:77:1::2",     "fd00:77:2::3",
                                             "::",           "::ffff:127.0.0.1", "::ffff:10.77.1.2", "::ffff:0.0.0.0",
                                             "::ffff:127.3.4.5"};

// A narrow band of ports, so rules and operations meet often.
uint16_t random_port(Rng& rng) {
    if (rng.chance(4)) return 53;
    return static_cast<uint16_t>(kPortLo + rng.below(24));
}

std::string random_ports(Rng& rng) {
    if (rng.chance(20)) return "";
    std::string out = ", ports: [";
    unsigned n = 1 + rng.below(2);
    for (unsigned i = 0; i < n; ++i) {
        if (i) out += ", ";
        if (rng.chance(45)) {
            uint16_t lo = random_port(rng);
            uint16_t hi = static_cast<uint16_t>(lo + rng.below(10));
            if (lo == 53) hi = 53;
            out += "\"" + std::to_string(lo) + "-" + std::to_string(hi) + "\"";
        } else {
            out += std::to_string(random_port(rng));
        }
    }
    return out + "]";
}

std::string random_net_item(Rng& rng, bool with_proto) {
    std::string out = "{ cidr: \"" + rng.pick(kCidrs) + "\"" + random_ports(rng);
    if (with_proto) {
        unsigned p = rng.below(4);
        if (p == 1) out += ", proto: tcp";
        if (p == 2) out += ", proto: udp";
        if (p == 3) out += ", proto: any";
    }
    return out + " }";
}

void net_list(Rng& rng, std::string& out, const char* key, unsigned max_items, unsigned percent) {
    if (!rng.chance(percent)) return;
    unsigned n = 1 + rng.below(max_items);
    out += std::string("  ") + key + ":\n";
    for (unsigned i = 0; i < n; ++i) out += "    - " + random_net_item(rng, true) + "\n";
}

}  // namespace

std::string random_net_policy(Rng& rng, size_t index) {
    std::string out = "tool: diff-net-" + std::to_string(index) + "\n";
    out += rng.chance(25) ? "mode: audit\n" : "mode: enforce\n";
    unsigned shape = rng.below(100);
    if (shape < 6) return out + "network: none\n";
    if (shape < 14) return out + "network: loopback\n";
    out += "network:\n  families: [inet, inet6]\n";
    size_t before = out.size();
    net_list(rng, out, "connect", 4, 80);
    net_list(rng, out, "bind", 3, 50);
    net_list(rng, out, "send", 3, 50);
    net_list(rng, out, "deny", 2, 45);
    if (out.size() == before) out += "  connect:\n    - " + random_net_item(rng, true) + "\n";
    if (rng.chance(15)) out += "  dns: [127.0.0.53]\n";
    return out;
}

std::vector<NetOp> random_net_ops(Rng& rng, size_t n) {
    std::vector<NetOp> ops;
    for (size_t i = 0; i < n; ++i) {
        NetOp o;
        unsigned k = rng.below(100);
        o.op.kind = k < 45 ? OpKind::Connect : k < 70 ? OpKind::Send : OpKind::Bind;
        o.type = o.op.kind == OpKind::Send ? SOCK_DGRAM : rng.chance(50) ? SOCK_STREAM : SOCK_DGRAM;
        o.op.proto = o.type == SOCK_STREAM ? BW_PROTO_TCP : BW_PROTO_UDP;
        o.family = rng.chance(50) ? AF_INET : AF_INET6;
        o.addr = rng.pick(o.family == AF_INET ? kV4Targets : kV6Targets);
        o.op.addr = *policy::parse_ip(o.addr);
        o.op.port = random_port(rng);
        ops.push_back(std::move(o));
    }
    return ops;
}

// ---------------------------------------------------------------- files

const std::vector<std::string>& tree_dirs() {
    static const std::vector<std::string> d = {"", "a", "a/b", "a/b/c", "a/d", "e", "e/f", "m", "m/sub"};
    return d;
}

const std::vector<std::string>& tree_exec_dirs() {
    static const std::vector<std::string> d = {"", "a", "a/b/c", "e/f", "m/sub"};
    return d;
}

namespace {

std::string abs_of(const std::string& rel) { return rel.empty() ? kFileRoot : std::string(kFileRoot) + "/" + rel; }

// Rule targets: directories (subtrees) and a few files.
std::string random_target(Rng& rng) {
    static const std::vector<std::string> files = {"a/x", "e/x", "m/sub/x", "a/b/c/prog", "e/f/prog", "m/sub/prog"};
    return "\"" + abs_of(rng.chance(80) ? rng.pick(tree_dirs()) : rng.pick(files)) + "\"";
}

std::string target_list(Rng& rng, unsigned max) {
    unsigned n = 1 + rng.below(max);
    std::string out = "[";
    for (unsigned i = 0; i < n; ++i) out += (i ? ", " : "") + random_target(rng);
    return out + "]";
}

}  // namespace

std::string random_file_policy(Rng& rng, size_t index) {
    std::string out = "tool: diff-files-" + std::to_string(index) + "\n";
    out += rng.chance(20) ? "mode: audit\n" : "mode: enforce\n";
    out += "network: none\n";
    bool files = rng.chance(85);
    bool exec = !files || rng.chance(30);
    if (files) {
        std::string body;
        for (const char* right : {"read", "write", "create", "remove", "exec"})
            if (rng.chance(55)) body += std::string("  ") + right + ": " + target_list(rng, 3) + "\n";
        if (rng.chance(50)) {
            body += "  deny:\n";
            unsigned n = 1 + rng.below(2);
            for (unsigned i = 0; i < n; ++i) {
                if (rng.chance(40)) {
                    body += "    - " + random_target(rng) + "\n";
                    continue;
                }
                std::string rights;
                for (const char* r : {"read", "write", "create", "remove", "exec"})
                    if (rng.chance(40)) rights += (rights.empty() ? "" : ", ") + std::string(r);
                if (rights.empty()) rights = "write";
                body += "    - { path: " + random_target(rng) + ", rights: [" + rights + "] }\n";
            }
        }
        if (body.empty()) body = "  read: " + target_list(rng, 2) + "\n";
        out += "files:\n" + body;
    }
    if (exec) out += "exec:\n  allow: " + target_list(rng, 2) + "\n";
    return out;
}

std::vector<FileOp> random_file_ops(Rng& rng, size_t n, uint64_t& serial) {
    std::vector<FileOp> ops;
    for (size_t i = 0; i < n; ++i) {
        FileOp o;
        unsigned k = rng.below(100);
        bool alias = rng.chance(12);
        std::string dir = alias ? kAliasOf : rng.pick(tree_dirs());
        if (k < 22) {
            o.method = FileMethod::OpenRead;
        } else if (k < 40) {
            o.method = FileMethod::OpenWrite;
        } else if (k < 58) {
            unsigned c = rng.below(3);
            o.method = c == 0 ? FileMethod::Mknod : c == 1 ? FileMethod::Mkdir : FileMethod::Symlink;
        } else if (k < 68) {
            o.method = FileMethod::Unlink;
        } else if (k < 80) {
            // rename and link stay on one mount (EXDEV otherwise): the root
            // filesystem's directories, or those of the mounted one
            unsigned m = rng.below(100);
            o.method = m < 50 ? FileMethod::Rename : m < 80 ? FileMethod::Link : FileMethod::Exchange;
            static const std::vector<std::string> rootfs = {"", "a", "a/b", "a/b/c", "a/d", "e", "e/f"};
            static const std::vector<std::string> mounted = {"m", "m/sub"};
            const auto& group = rng.chance(75) ? rootfs : mounted;
            std::string src = rng.pick(group), dst = rng.pick(group);
            uint64_t n = serial++;
            o.op.kind = OpKind::Remove;
            o.op.path = abs_of((src.empty() ? "" : src + "/") + "v" + std::to_string(n));
            o.path = o.op.path;
            o.to_judged = abs_of((dst.empty() ? "" : dst + "/") + "r" + std::to_string(n));
            o.to = o.to_judged;
            ops.push_back(std::move(o));
            continue;
        } else {
            o.method = FileMethod::Exec;
            if (!alias) dir = rng.pick(tree_exec_dirs());
        }
        std::string name;
        switch (o.method) {
            case FileMethod::OpenRead:
            case FileMethod::OpenWrite: name = rng.chance(50) ? "x" : "y"; break;
            case FileMethod::Mknod:
            case FileMethod::Mkdir:
            case FileMethod::Symlink: name = "n" + std::to_string(serial++); break;
            case FileMethod::Unlink: name = "v" + std::to_string(serial++); break;
            case FileMethod::Exec: name = "prog"; break;
            default: break;
        }
        std::string rel = (dir.empty() ? "" : dir + "/") + name;
        o.op.path = abs_of(rel);
        o.path = alias ? std::string(kFileRoot) + "/" + kAliasDir + rel.substr(std::string(kAliasOf).size()) : o.op.path;
        switch (o.method) {
            case FileMethod::OpenRead: o.op.kind = OpKind::Open, o.op.access = policy::FileAccess::Read; break;
            case FileMethod::OpenWrite: o.op.kind = OpKind::Open, o.op.access = policy::FileAccess::Write; break;
            case FileMethod::Mknod:
            case FileMethod::Mkdir:
            case FileMethod::Symlink: o.op.kind = OpKind::Create; break;
            case FileMethod::Unlink: o.op.kind = OpKind::Remove; break;
            case FileMethod::Exec: o.op.kind = OpKind::Exec; break;
            default: break;
        }
        ops.push_back(std::move(o));
    }
    return ops;
}

std::string_view to_string(FileMethod m) {
    switch (m) {
        case FileMethod::OpenRead: return "open(O_RDONLY)";
        case FileMethod::OpenWrite: return "open(O_WRONLY)";
        case FileMethod::Mknod: return "mknod";
        case FileMethod::Mkdir: return "mkdir";
        case FileMethod::Symlink: return "symlink";
        case FileMethod::Unlink: return "unlink";
        case FileMethod::Exec: return "execve";
        case FileMethod::Rename: return "rename";
        case FileMethod::Link: return "link";
        case FileMethod::Exchange: return "renameat2(RENAME_EXCHANGE)";
    }
    return "?";
}

policy::Decision evaluate_file_op(const policy::Bundle& b, const FileOp& op) {
    if (op.method == FileMethod::Rename || op.method == FileMethod::Link)
        return policy::evaluate_move(b, op.op.path, op.to_judged, op.method == FileMethod::Rename);
    if (op.method == FileMethod::Exchange) {  // each object moves to the other's name; the first refusal decides
        auto there = policy::evaluate_move(b, op.op.path, op.to_judged, true);
        if (there.verdict != policy::Verdict::Allow) return there;
        return policy::evaluate_move(b, op.to_judged, op.op.path, true);
    }
    return policy::evaluate(b, op.op);
}

// ---------------------------------------------------------------- reports

std::string describe(const policy::Operation& op) {
    std::string out(policy::to_string(op.kind));
    switch (op.kind) {
        case OpKind::Open:
            return out + " " + op.path + (op.access == policy::FileAccess::Write ? " (write)" : " (read)");
        case OpKind::Create:
        case OpKind::Remove:
        case OpKind::Exec: return out + " " + op.path;
        case OpKind::Connect:
        case OpKind::Bind:
        case OpKind::Send: {
            if (!op.unix_addr.empty()) {
                std::string a;
                for (char c : op.unix_addr) a += c ? std::string(1, c) : std::string("\\x00");
                return out + " unix " + a;
            }
            std::string a = policy::format_addr(op.addr);
            if (!policy::is_v4_mapped(op.addr)) a = "[" + a + "]";
            return out + " " + a + ":" + std::to_string(op.port) + (op.proto == BW_PROTO_TCP ? "/tcp" : "/udp");
        }
        default: return out;
    }
}

std::string reproduction(uint64_t seed, size_t index, const std::string& policy_text, const std::string& op,
                         const std::string& expected, const std::string& got) {
    std::string out = "DISAGREEMENT seed=" + std::to_string(seed) + " policy=" + std::to_string(index) +
                      " (replay: BULWARK_DIFF_SEED=" + std::to_string(seed) + ")\n";
    out += "--- rule file\n" + policy_text;
    out += "--- operation: " + op + "\n";
    out += "--- evaluator: " + expected + "\n--- kernel:    " + got + "\n";
    return out;
}

// ---------------------------------------------------------------- unix sockets

const std::vector<std::string>& unix_dirs() {
    static const std::vector<std::string> d = {"", "a", "a/b", "c"};
    return d;
}

namespace {

std::string unix_path(const std::string& dir, const std::string& name) {
    return std::string(kUnixRoot) + (dir.empty() ? "" : "/" + dir) + "/" + name;
}

const std::vector<std::string> kUnixNames = {"s1", "s2", "q", "s1x", "missing"};
const std::vector<std::string> kAbstract = {"@bwdiff-1", "@bwdiff-2", "@bwdiff-12", std::string("@bwdiff-1\0x", 11)};

std::string random_unix_rule(Rng& rng) {
    unsigned k = rng.below(10);
    if (k < 2) return kAbstract[rng.below(3)];  // a rule file cannot hold a NUL byte
    const std::string& dir = rng.pick(unix_dirs());
    if (k < 5) return std::string(kUnixRoot) + (dir.empty() ? "" : "/" + dir) + "/";  // every socket below
    return unix_path(dir, rng.pick(kUnixNames));
}

}  // namespace

std::string random_unix_policy(Rng& rng, size_t index) {
    std::string out = "tool: diff-unix-" + std::to_string(index) + "\n";
    out += rng.chance(20) ? "mode: audit\n" : "mode: enforce\n";
    // read on the tree: a file grant, which must never become a connect right
    out += "files:\n  read: [" + std::string(kUnixRoot) + "]\n";
    out += "network:\n  families: [unix]\n";
    if (rng.chance(10)) return out;  // no unix rule at all
    out += "  unix:\n";
    bool any = false;
    for (const char* key : {"connect", "send"}) {
        if (!rng.chance(key[0] == 'c' ? 85 : 60) && (any || key[0] == 'c')) continue;
        any = true;
        out += std::string("    ") + key + ":\n";
        unsigned n = 1 + rng.below(4);
        for (unsigned i = 0; i < n; ++i) out += "      - \"" + random_unix_rule(rng) + "\"\n";
    }
    return out;
}

std::vector<UnixOp> random_unix_ops(Rng& rng, size_t n) {
    std::vector<UnixOp> out;
    for (size_t i = 0; i < n; ++i) {
        UnixOp u;
        unsigned kind = rng.below(3);  // stream connect, datagram connect, datagram sendto
        u.op.kind = kind == 2 ? OpKind::Send : OpKind::Connect;
        u.type = kind == 0 ? (rng.chance(30) ? SOCK_SEQPACKET : SOCK_STREAM) : SOCK_DGRAM;
        if (rng.chance(20)) {
            u.op.unix_addr = rng.pick(kAbstract);
        } else {
            const std::string& dir = rng.pick(unix_dirs());
            std::string name = rng.pick(kUnixNames);
            std::string p = unix_path(dir, name);
            switch (rng.below(8)) {
                case 0: p = "/" + p; break;                                        // "//tmp/..."
                case 1: p = unix_path(dir, "./" + name); break;                    // ".../a/./s1"
                case 2: p = unix_path(dir.empty() ? "a" : dir, "../" + name); break;  // climbs one level
                case 3: p = (dir.empty() ? "" : dir + "/") + name; break;          // relative to kUnixRoot
                default: break;
            }
            u.op.unix_addr = p;
        }
        out.push_back(std::move(u));
    }
    return out;
}

std::string rule_text(uint32_t id) { return id == BW_NO_RULE ? "none" : std::to_string(id); }

uint8_t decision_of(policy::Verdict v) {
    return v == policy::Verdict::Allow ? BW_DECISION_ALLOW : v == policy::Verdict::Deny ? BW_DECISION_DENY : BW_DECISION_AUDIT;
}

}  // namespace bulwark::difftest
