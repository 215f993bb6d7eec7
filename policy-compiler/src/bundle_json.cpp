// Bundle <-> canonical JSON, and its content hash. Every struct has a
// to_json/from_json pair; from_json rejects what the compiler could never
// have produced (unknown enum names, over-full port range tables, rule ids
// that name no rule, a hash that does not match the content).
#include <openssl/evp.h>

#include <stdexcept>

#include "bulwark/policy/compiler.h"
#include "bulwark/policy/values.h"

namespace bulwark::policy {

using nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string& msg) { throw std::invalid_argument(msg); }

template <class E, size_t N>
std::string enum_name(E v, const std::array<const char*, N>& names) {
    size_t i = size_t(v);
    if (i >= N) fail("enum value out of range");
    return names[i];
}
template <class E, size_t N>
E enum_value(const json& j, const std::array<const char*, N>& names, const char* what) {
    const auto& s = j.get_ref<const std::string&>();
    for (size_t i = 0; i < N; ++i)
        if (s == names[i]) return E(i);
    fail(std::string("unknown ") + what + " \"" + s + "\"");
}

constexpr std::array<const char*, 2> kModes = {"enforce", "audit"};
constexpr std::array<const char*, 3> kNetModes = {"none", "loopback", "rules"};
constexpr std::array<const char*, 5> kActions = {"allow", "errno", "kill", "log", "trap"};
constexpr std::array<const char*, 3> kMte = {"off", "async", "sync"};
constexpr std::array<const char*, 3> kMicroVm = {"off", "preferred", "required"};
constexpr std::array<const char*, 4> kResponse = {"record", "require-grant", "stop", "narrow"};
constexpr std::array<const char*, 2> kReq = {"require", "warn"};

std::string hex(const uint8_t* p, size_t n) {
    static const char* d = "0123456789abcdef";
    std::string s;
    for (size_t i = 0; i < n; ++i) {
        s += d[p[i] >> 4];
        s += d[p[i] & 15];
    }
    return s;
}
void unhex(const json& j, uint8_t* out, size_t n) {
    const auto& s = j.get_ref<const std::string&>();
    if (s.size() != n * 2) fail("address must be " + std::to_string(n * 2) + " hex digits");
    auto v = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        fail("bad hex digit");
    };
    for (size_t i = 0; i < n; ++i) out[i] = uint8_t(v(s[2 * i]) << 4 | v(s[2 * i + 1]));
}

template <class T>
T num(const json& j, const char* key) {
    return j.at(key).get<T>();
}

json loc_json(const SourceLoc& l) { return {{"file", l.file}, {"line", l.line}, {"col", l.col}}; }
SourceLoc loc_from(const json& j) { return {j.at("file").get<std::string>(), num<uint32_t>(j, "line"), num<uint32_t>(j, "col")}; }

json range_json(const bw_port_range& r) {
    return {{"lo", r.lo}, {"hi", r.hi}, {"proto_mask", r.proto_mask}, {"op_mask", r.op_mask},
            {"action", r.action}, {"rule_id", r.rule_id}};
}
bw_port_range range_from(const json& j) {
    bw_port_range r{};
    r.lo = num<uint16_t>(j, "lo");
    r.hi = num<uint16_t>(j, "hi");
    r.proto_mask = num<uint8_t>(j, "proto_mask");
    r.op_mask = num<uint8_t>(j, "op_mask");
    r.action = num<uint8_t>(j, "action");
    r.rule_id = num<uint32_t>(j, "rule_id");
    if (r.lo > r.hi) fail("port range reversed");
    if (r.action > BW_NET_ACTION_DENY) fail("bad network action");
    return r;
}

template <class A>
json pairs_json(const std::vector<std::pair<std::string, A>>& v) {
    json arr = json::array();
    for (const auto& [k, x] : v) arr.push_back(json::array({k, x}));
    return arr;
}
template <class A>
std::vector<std::pair<std::string, A>> pairs_from(const json& j) {
    std::vector<std::pair<std::string, A>> out;
    for (const auto& e : j) {
        if (!e.is_array() || e.size() != 2) fail("expected [name, value] pairs");
        out.emplace_back(e[0].get<std::string>(), e[1].get<A>());
    }
    return out;
}

template <class T>
json opt_json(const std::optional<T>& v) { return v ? json(*v) : json(nullptr); }
template <class T>
std::optional<T> opt_from(const json& j, const char* key) {
    const auto& v = j.at(key);
    if (v.is_null()) return std::nullopt;
    return v.get<T>();
}

}  // namespace

json bundle_to_json(const Bundle& b) {
    json j;
    j["format"] = b.format;
    j["tool"] = b.tool;
    j["description"] = b.description;
    j["extends"] = b.extends;
    j["hash"] = b.hash;
    j["mode"] = enum_name(b.mode, kModes);
    j["mandatory_layers"] = b.mandatory_layers;
    json bins = json::array();
    for (const auto& x : b.binaries) bins.push_back({{"path", x.path}, {"sha256", opt_json(x.sha256)}, {"rule_id", x.rule_id}});
    j["binaries"] = std::move(bins);
    json files = json::array();
    for (const auto& f : b.files)
        files.push_back({{"path", f.path}, {"allow", f.allow}, {"deny", f.deny}, {"rule_id", f.rule_id}});
    j["files"] = std::move(files);
    json rules = json::array();
    for (const auto& r : b.network.rules)
        rules.push_back({{"host", opt_json(r.host)}, {"addr", hex(r.addr.data(), 16)}, {"prefix", r.prefix},
                         {"port_lo", r.port_lo}, {"port_hi", r.port_hi}, {"proto_mask", r.proto_mask},
                         {"op_mask", r.op_mask}, {"action", r.action}, {"rule_id", r.rule_id}});
    json network = {{"mode", enum_name(b.network.mode, kNetModes)}, {"af_allow", b.network.af_allow},
                    {"sock_type_allow", b.network.sock_type_allow}, {"dns", b.network.dns}};
    network["rules"] = std::move(rules);
    json unix_rules = json::array();
    for (const auto& u : b.network.unix_rules)
        unix_rules.push_back({{"address", u.address}, {"op_mask", u.op_mask}, {"rule_id", u.rule_id}});
    // absent when empty: a bundle without unix rules keeps the JSON (and hash) it had before they existed
    if (!unix_rules.empty()) network["unix"] = std::move(unix_rules);
    // absent when every protocol is open (the JSON and hash bundles had before the list existed)
    if (b.network.netlink_allow) network["netlink_allow"] = *b.network.netlink_allow;
    j["network"] = std::move(network);
    json prog = json::array();
    for (const auto& f : b.seccomp.program) prog.push_back(json::array({f.code, f.jt, f.jf, f.k}));
    j["seccomp"] = {{"program", prog}, {"arches", b.seccomp.arches},
                    {"default_action", enum_name(b.seccomp.default_action, kActions)},
                    {"default_errno", b.seccomp.default_errno}, {"baseline", b.seccomp.baseline},
                    {"syscall_rules", pairs_json(b.seccomp.syscall_rules)}};
    j["syscalls"] = {{"baseline", b.syscalls.baseline}, {"allow", pairs_json(b.syscalls.allow)},
                     {"deny", pairs_json(b.syscalls.deny)}, {"violation", enum_name(b.syscalls.violation, kActions)},
                     {"violation_errno", b.syscalls.violation_errno},
                     {"architectures", pairs_json(b.syscalls.architectures)}};
    json llp = json::array(), llports = json::array();
    for (const auto& p : b.landlock.paths) llp.push_back({{"path", p.path}, {"access", p.access}, {"rule_id", p.rule_id}});
    for (const auto& p : b.landlock.ports) llports.push_back({{"port", p.port}, {"access", p.access}, {"rule_id", p.rule_id}});
    json landlock = {{"handled_fs", b.landlock.handled_fs}, {"handled_net", b.landlock.handled_net},
                     {"scoped", b.landlock.scoped}, {"gaps", b.landlock.gaps}};
    landlock["paths"] = std::move(llp);
    landlock["ports"] = std::move(llports);
    j["landlock"] = std::move(landlock);
    json bf = json::array(), bn = json::array();
    for (const auto& f : b.bpf.files)
        bf.push_back({{"path", f.path}, {"allow", f.value.allow}, {"deny", f.value.deny},
                      {"allow_rule_id", f.value.allow_rule_id}, {"deny_rule_id", f.value.deny_rule_id}});
    for (const auto& n : b.bpf.net) {
        json ranges = json::array();
        for (uint32_t i = 0; i < n.value.count && i < BW_PORT_RANGES_MAX; ++i) ranges.push_back(range_json(n.value.ranges[i]));
        bn.push_back({{"prefixlen", n.key.prefixlen}, {"policy_id", n.key.policy_id}, {"addr", hex(n.key.addr, 16)},
                      {"ranges", std::move(ranges)}});
    }
    const auto& h = b.bpf.header;
    json bpf = {{"header", {{"version", h.version}, {"mode", h.mode}, {"flags", h.flags}, {"af_allow", h.af_allow},
                            {"sock_type_allow", h.sock_type_allow}}}};
    // only with a netlink list: other bundles keep the JSON (and hash) they had
    if (h.flags & BW_POL_NETLINK_LIST) bpf["header"]["netlink_allow"] = h.netlink_allow;
    bpf["files"] = std::move(bf);
    bpf["net"] = std::move(bn);
    json bu = json::array();
    for (const auto& u : b.bpf.unix_sockets) {
        json e = {{"prefixlen", u.key.prefixlen}, {"policy_id", u.key.policy_id}, {"kind", u.key.kind},
                  {"name", hex(u.key.name, BW_UNIX_KEY_NAME)}, {"op_mask", u.value.op_mask},
                  {"connect_rule_id", u.value.connect_rule_id}, {"send_rule_id", u.value.send_rule_id}};
        // only where a bind rule covers the address: other bundles keep the JSON (and hash) they had
        if (u.value.op_mask & BW_NET_BIND) e["bind_rule_id"] = u.value.bind_rule_id;
        bu.push_back(std::move(e));
    }
    if (!bu.empty()) bpf["unix"] = std::move(bu);
    j["bpf"] = std::move(bpf);
    const auto& L = b.limits;
    j["limits"] = {{"memory_bytes", opt_json(L.memory_bytes)}, {"pids", opt_json(L.pids)},
                   {"cpu_percent", opt_json(L.cpu_percent)}, {"timeout_ms", opt_json(L.timeout_ms)},
                   {"output_bytes", opt_json(L.output_bytes)}, {"file_size_bytes", opt_json(L.file_size_bytes)},
                   {"open_files", opt_json(L.open_files)}, {"rule_ids", pairs_json(L.rule_ids)}};
    // Written only when the rule file has a `microvm:` block, so that the
    // hash of a bundle without one does not change.
    if (!b.microvm.rule_ids.empty()) {
        const auto& m = b.microvm;
        j["microvm"] = {{"mode", enum_name(m.mode, kMicroVm)}, {"memory_bytes", m.memory_bytes},
                        {"vcpus", m.vcpus}, {"confidential", m.confidential}, {"rule_ids", pairs_json(m.rule_ids)}};
    }
    // Likewise only with a `profile:` block.
    if (b.profile.enabled) {
        const auto& p = b.profile;
        j["profile"] = {{"learn_runs", p.learn_runs}, {"respond", enum_name(p.respond, kResponse)},
                        {"rule_ids", pairs_json(p.rule_ids)}};
        if (p.task_learn_runs) j["profile"]["task_learn_runs"] = p.task_learn_runs;
    }
    json props = json::array();
    for (const auto& [n, r] : b.hardening.properties) props.push_back(json::array({n, enum_name(r, kReq)}));
    j["hardening"] = {{"mte", enum_name(b.hardening.mte, kMte)}, {"properties", props},
                      {"disable_store_bypass", b.hardening.disable_store_bypass},
                      {"disable_indirect_branch", b.hardening.disable_indirect_branch},
                      {"rule_id", b.hardening.rule_id}};
    j["env"] = {{"pass", b.env.pass}, {"set", pairs_json(b.env.set)}, {"clear_all", b.env.clear_all}};
    json refs = json::array();
    for (const auto& r : b.rules) {
        json ref = {{"id", r.id}, {"loc", loc_json(r.loc)}, {"text", r.text}, {"section", r.section}};
        if (r.unenforceable_run) ref["unenforceable"] = "run";
        refs.push_back(std::move(ref));
    }
    j["rules"] = std::move(refs);
    return j;
}

namespace {

Bundle from_json_unchecked(const json& j) {
    Bundle b;
    b.format = num<uint32_t>(j, "format");
    if (b.format != kBundleFormat)
        fail("bundle format " + std::to_string(b.format) + " (this build reads " + std::to_string(kBundleFormat) + ")");
    b.tool = j.at("tool").get<std::string>();
    b.description = j.at("description").get<std::string>();
    b.extends = j.at("extends").get<std::vector<std::string>>();
    b.hash = j.at("hash").get<std::string>();
    b.mode = enum_value<Mode>(j.at("mode"), kModes, "mode");
    b.mandatory_layers = j.at("mandatory_layers").get<std::vector<std::string>>();
    for (const auto& x : j.at("binaries"))
        b.binaries.push_back({x.at("path").get<std::string>(), opt_from<std::string>(x, "sha256"), num<uint32_t>(x, "rule_id")});
    for (const auto& f : j.at("files"))
        b.files.push_back({f.at("path").get<std::string>(), num<uint32_t>(f, "allow"), num<uint32_t>(f, "deny"),
                           num<uint32_t>(f, "rule_id")});
    const auto& n = j.at("network");
    b.network.mode = enum_value<NetMode>(n.at("mode"), kNetModes, "network mode");
    for (const auto& r : n.at("rules")) {
        NetRule nr;
        nr.host = opt_from<std::string>(r, "host");
        unhex(r.at("addr"), nr.addr.data(), 16);
        nr.prefix = num<uint8_t>(r, "prefix");
        if (nr.prefix > 128) fail("prefix over 128");
        nr.port_lo = num<uint16_t>(r, "port_lo");
        nr.port_hi = num<uint16_t>(r, "port_hi");
        nr.proto_mask = num<uint8_t>(r, "proto_mask");
        nr.op_mask = num<uint8_t>(r, "op_mask");
        nr.action = num<uint8_t>(r, "action");
        nr.rule_id = num<uint32_t>(r, "rule_id");
        b.network.rules.push_back(std::move(nr));
    }
    b.network.af_allow = num<uint64_t>(n, "af_allow");
    b.network.sock_type_allow = num<uint32_t>(n, "sock_type_allow");
    b.network.dns = n.at("dns").get<std::vector<std::string>>();
    if (n.contains("netlink_allow")) b.network.netlink_allow = num<uint32_t>(n, "netlink_allow");
    if (n.contains("unix"))  // bundles written before unix rules have none: every named socket is refused
        for (const auto& u : n.at("unix")) {
            UnixRule r{u.at("address").get<std::string>(), num<uint32_t>(u, "op_mask"), num<uint32_t>(u, "rule_id")};
            if (r.op_mask == 0 || (r.op_mask & ~uint32_t(BW_NET_CONNECT | BW_NET_SEND | BW_NET_BIND)))
                fail("bad unix op_mask");
            b.network.unix_rules.push_back(std::move(r));
        }
    const auto& s = j.at("seccomp");
    for (const auto& f : s.at("program")) {
        if (!f.is_array() || f.size() != 4) fail("seccomp instructions are [code, jt, jf, k]");
        b.seccomp.program.push_back(sock_filter{f[0].get<uint16_t>(), f[1].get<uint8_t>(), f[2].get<uint8_t>(), f[3].get<uint32_t>()});
    }
    b.seccomp.arches = s.at("arches").get<std::vector<uint32_t>>();
    b.seccomp.default_action = enum_value<SeccompAction>(s.at("default_action"), kActions, "seccomp action");
    b.seccomp.default_errno = num<uint16_t>(s, "default_errno");
    b.seccomp.baseline = s.at("baseline").get<std::string>();
    b.seccomp.syscall_rules = pairs_from<uint32_t>(s.at("syscall_rules"));
    const auto& sc = j.at("syscalls");
    b.syscalls.baseline = sc.at("baseline").get<std::string>();
    b.syscalls.allow = pairs_from<uint32_t>(sc.at("allow"));
    b.syscalls.deny = pairs_from<uint32_t>(sc.at("deny"));
    b.syscalls.violation = enum_value<SeccompAction>(sc.at("violation"), kActions, "seccomp action");
    b.syscalls.violation_errno = num<uint16_t>(sc, "violation_errno");
    b.syscalls.architectures = pairs_from<uint32_t>(sc.at("architectures"));
    const auto& ll = j.at("landlock");
    b.landlock.handled_fs = num<uint64_t>(ll, "handled_fs");
    b.landlock.handled_net = num<uint64_t>(ll, "handled_net");
    b.landlock.scoped = num<uint64_t>(ll, "scoped");
    for (const auto& p : ll.at("paths"))
        b.landlock.paths.push_back({p.at("path").get<std::string>(), num<uint64_t>(p, "access"), num<uint32_t>(p, "rule_id")});
    for (const auto& p : ll.at("ports"))
        b.landlock.ports.push_back({num<uint16_t>(p, "port"), num<uint64_t>(p, "access"), num<uint32_t>(p, "rule_id")});
    b.landlock.gaps = ll.at("gaps").get<std::vector<std::string>>();
    const auto& bpf = j.at("bpf");
    const auto& h = bpf.at("header");
    b.bpf.header.version = num<uint64_t>(h, "version");
    b.bpf.header.mode = num<uint32_t>(h, "mode");
    b.bpf.header.flags = num<uint32_t>(h, "flags");
    b.bpf.header.af_allow = num<uint64_t>(h, "af_allow");
    b.bpf.header.sock_type_allow = num<uint32_t>(h, "sock_type_allow");
    if (h.contains("netlink_allow")) b.bpf.header.netlink_allow = num<uint32_t>(h, "netlink_allow");
    for (const auto& f : bpf.at("files")) {
        BpfFileEntry e;
        e.path = f.at("path").get<std::string>();
        e.value.allow = num<uint32_t>(f, "allow");
        e.value.deny = num<uint32_t>(f, "deny");
        e.value.allow_rule_id = num<uint32_t>(f, "allow_rule_id");
        e.value.deny_rule_id = num<uint32_t>(f, "deny_rule_id");
        b.bpf.files.push_back(std::move(e));
    }
    for (const auto& x : bpf.at("net")) {
        BpfNetEntry e{};
        e.key.prefixlen = num<uint32_t>(x, "prefixlen");
        if (e.key.prefixlen > 32 + 128) fail("LPM prefix length over 160");
        e.key.policy_id = num<uint32_t>(x, "policy_id");
        unhex(x.at("addr"), e.key.addr, 16);
        const auto& ranges = x.at("ranges");
        if (ranges.size() > BW_PORT_RANGES_MAX) fail("more than BW_PORT_RANGES_MAX port ranges in one entry");
        e.value.count = uint32_t(ranges.size());
        for (size_t i = 0; i < ranges.size(); ++i) e.value.ranges[i] = range_from(ranges[i]);
        b.bpf.net.push_back(e);
    }
    if (bpf.contains("unix"))
        for (const auto& x : bpf.at("unix")) {
            BpfUnixEntry e{};
            e.key.prefixlen = num<uint32_t>(x, "prefixlen");
            if (e.key.prefixlen > BW_UNIX_PREFIX_FULL) fail("unix LPM prefix length over the key");
            e.key.policy_id = num<uint32_t>(x, "policy_id");
            e.key.kind = num<uint8_t>(x, "kind");
            unhex(x.at("name"), e.key.name, BW_UNIX_KEY_NAME);
            e.value.op_mask = num<uint32_t>(x, "op_mask");
            e.value.connect_rule_id = num<uint32_t>(x, "connect_rule_id");
            e.value.send_rule_id = num<uint32_t>(x, "send_rule_id");
            e.value.bind_rule_id = x.contains("bind_rule_id") ? num<uint32_t>(x, "bind_rule_id") : BW_NO_RULE;
            if (e.value.op_mask & ~uint32_t(BW_NET_CONNECT | BW_NET_SEND | BW_NET_BIND)) fail("bad unix op_mask");
            b.bpf.unix_sockets.push_back(e);
        }
    const auto& L = j.at("limits");
    b.limits.memory_bytes = opt_from<uint64_t>(L, "memory_bytes");
    b.limits.pids = opt_from<uint64_t>(L, "pids");
    b.limits.cpu_percent = opt_from<uint32_t>(L, "cpu_percent");
    b.limits.timeout_ms = opt_from<uint64_t>(L, "timeout_ms");
    b.limits.output_bytes = opt_from<uint64_t>(L, "output_bytes");
    b.limits.file_size_bytes = opt_from<uint64_t>(L, "file_size_bytes");
    b.limits.open_files = opt_from<uint64_t>(L, "open_files");
    b.limits.rule_ids = pairs_from<uint32_t>(L.at("rule_ids"));
    if (j.contains("microvm")) {
        const auto& m = j.at("microvm");
        b.microvm.mode = enum_value<MicroVmMode>(m.at("mode"), kMicroVm, "microvm mode");
        b.microvm.memory_bytes = num<uint64_t>(m, "memory_bytes");
        b.microvm.vcpus = num<uint32_t>(m, "vcpus");
        b.microvm.confidential = m.at("confidential").get<bool>();
        b.microvm.rule_ids = pairs_from<uint32_t>(m.at("rule_ids"));
    }
    if (j.contains("profile")) {
        const auto& p = j.at("profile");
        b.profile.enabled = true;
        b.profile.learn_runs = num<uint32_t>(p, "learn_runs");
        if (p.contains("task_learn_runs")) b.profile.task_learn_runs = num<uint32_t>(p, "task_learn_runs");
        b.profile.respond = enum_value<ProfileResponse>(p.at("respond"), kResponse, "profile response");
        b.profile.rule_ids = pairs_from<uint32_t>(p.at("rule_ids"));
    }
    const auto& hd = j.at("hardening");
    b.hardening.mte = enum_value<MteMode>(hd.at("mte"), kMte, "mte mode");
    for (const auto& p : hd.at("properties")) {
        if (!p.is_array() || p.size() != 2) fail("hardening properties are [name, require|warn]");
        b.hardening.properties.emplace_back(p[0].get<std::string>(), enum_value<Requirement>(p[1], kReq, "requirement"));
    }
    b.hardening.disable_store_bypass = hd.at("disable_store_bypass").get<bool>();
    b.hardening.disable_indirect_branch = hd.at("disable_indirect_branch").get<bool>();
    b.hardening.rule_id = num<uint32_t>(hd, "rule_id");
    const auto& env = j.at("env");
    b.env.pass = env.at("pass").get<std::vector<std::string>>();
    b.env.set = pairs_from<std::string>(env.at("set"));
    b.env.clear_all = env.at("clear_all").get<bool>();
    for (const auto& r : j.at("rules")) {
        RuleRef ref{num<uint32_t>(r, "id"), loc_from(r.at("loc")), r.at("text").get<std::string>(),
                    r.at("section").get<std::string>()};
        if (auto u = r.find("unenforceable"); u != r.end()) {
            if (*u != "run") fail("rules[].unenforceable must be \"run\"");
            ref.unenforceable_run = true;
        }
        if (ref.id != b.rules.size()) fail("rule ids must be 0, 1, 2, ... in order");
        b.rules.push_back(std::move(ref));
    }
    // Every rule id must name a rule.
    auto check = [&](uint32_t id) {
        if (id != BW_NO_RULE && id >= b.rules.size()) fail("rule id " + std::to_string(id) + " names no rule");
    };
    for (const auto& x : b.binaries) check(x.rule_id);
    for (const auto& x : b.files) check(x.rule_id);
    for (const auto& x : b.network.rules) check(x.rule_id);
    for (const auto& x : b.bpf.files) check(x.value.allow_rule_id), check(x.value.deny_rule_id);
    for (const auto& x : b.bpf.net)
        for (uint32_t i = 0; i < x.value.count; ++i) check(x.value.ranges[i].rule_id);
    for (const auto& x : b.landlock.paths) check(x.rule_id);
    for (const auto& x : b.network.unix_rules) check(x.rule_id);
    for (const auto& x : b.bpf.unix_sockets)
        check(x.value.connect_rule_id), check(x.value.send_rule_id), check(x.value.bind_rule_id);
    return b;
}

}  // namespace

std::expected<Bundle, std::string> bundle_from_json(const json& j) {
    try {
        Bundle b = from_json_unchecked(j);
        if (!b.hash.empty() && bundle_hash(b) != b.hash)
            return std::unexpected("bundle hash mismatch: the content is not what was compiled");
        return b;
    } catch (const std::exception& e) {
        return std::unexpected(std::string("malformed bundle: ") + e.what());
    }
}

std::expected<Bundle, std::string> bundle_from_own_json(const json& j) {
    try {
        return from_json_unchecked(j);
    } catch (const std::exception& e) {
        return std::unexpected(std::string("malformed bundle: ") + e.what());
    }
}

std::string canonical_dump(const json& j) {
    return j.dump(-1, ' ', true, json::error_handler_t::strict);
}

std::string bundle_hash(const Bundle& b) {
    json j = bundle_to_json(b);
    j["hash"] = "";
    std::string text = canonical_dump(j);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (EVP_Digest(text.data(), text.size(), md, &len, EVP_sha256(), nullptr) != 1 || len != 32)
        return "sha256:unavailable";
    return "sha256:" + hex(md, len);
}

}  // namespace bulwark::policy
