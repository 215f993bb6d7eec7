#include "bulwark/policy/policy_test.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "bulwark/policy/match.h"
#include "bulwark/policy/seccomp.h"

namespace bulwark::policy {

namespace {

struct Parser {
    std::string file;
    std::vector<TestDiagnostic> diags;

    SourceLoc at(const YAML::Node& n) const {
        auto m = n.Mark();
        if (m.line < 0) return {file, 0, 0};
        return {file, static_cast<uint32_t>(m.line + 1), static_cast<uint32_t>(m.column + 1)};
    }
    void error(const YAML::Node& n, std::string msg) { diags.push_back({at(n), std::move(msg)}); }

    std::optional<std::string> scalar(const YAML::Node& n, std::string_view what) {
        if (!n.IsScalar()) {
            error(n, std::string(what) + " must be a scalar");
            return std::nullopt;
        }
        return n.Scalar();
    }

    std::optional<uint64_t> integer(const YAML::Node& n, std::string_view what, uint64_t max) {
        auto s = scalar(n, what);
        if (!s) return std::nullopt;
        std::string_view v = *s;
        int base = 10;
        if (v.starts_with("0x") || v.starts_with("0X")) {
            v.remove_prefix(2);
            base = 16;
        }
        uint64_t out = 0;
        auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out, base);
        if (v.empty() || ec != std::errc{} || p != v.data() + v.size() || out > max) {
            error(n, std::string(what) + " '" + *s + "' must be an integer from 0 to " + std::to_string(max));
            return std::nullopt;
        }
        return out;
    }

    // Every key of a mapping must be one of `allowed`.
    bool keys(const YAML::Node& map, std::initializer_list<std::string_view> allowed, std::string_view where) {
        bool ok = true;
        for (auto it = map.begin(); it != map.end(); ++it) {
            std::string k = it->first.IsScalar() ? it->first.Scalar() : "?";
            if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
                std::string list;
                for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
                error(it->first, "unknown key '" + k + "' in " + std::string(where) + " (expected one of: " + list + ")");
                ok = false;
            }
        }
        return ok;
    }

    std::optional<PolicyTestCase> parse_case(const YAML::Node& c) {
        if (!c.IsMap()) {
            error(c, "a case must be a mapping like { op: open, path: /etc/x, access: read, expect: deny }");
            return std::nullopt;
        }
        size_t before = diags.size();
        PolicyTestCase t;
        t.loc = at(c);
        auto op_node = c["op"];
        if (!op_node) {
            error(c, "case has no 'op'");
            return std::nullopt;
        }
        auto op_text = scalar(op_node, "op");
        if (!op_text) return std::nullopt;
        auto kind = parse_op_kind(*op_text);
        if (!kind) {
            error(op_node, kind.error());
            return std::nullopt;
        }
        t.op.kind = *kind;
        std::string text = *op_text;
        const std::string a_case = (std::string("aeiou").find(text[0]) != std::string::npos ? "an " : "a ") +
                                   text + " case";
        switch (*kind) {
            case OpKind::Open:
                keys(c, {"op", "path", "access", "expect"}, a_case);
                break;
            case OpKind::Create:
            case OpKind::Remove:
            case OpKind::Exec:
                keys(c, {"op", "path", "expect"}, a_case);
                break;
            case OpKind::Connect:
            case OpKind::Bind:
            case OpKind::Send:
                keys(c, {"op", "addr", "port", "proto", "unix", "expect"}, a_case);
                break;
            case OpKind::Socket:
                keys(c, {"op", "family", "type", "expect"}, a_case);
                break;
            case OpKind::Syscall:
                keys(c, {"op", "name", "args", "arch", "expect"}, a_case);
                break;
        }
        auto need = [&](const char* key) -> YAML::Node {
            YAML::Node n = c[key];
            if (!n) error(c, a_case + " needs '" + key + "'");
            return n;
        };
        switch (*kind) {
            case OpKind::Open:
            case OpKind::Create:
            case OpKind::Remove:
            case OpKind::Exec: {
                if (auto p = need("path")) {
                    if (auto s = scalar(p, "path")) {
                        if (auto n = resolve_operation_path(*s); !n) error(p, "path: " + n.error());
                        t.op.path = *s;
                        text += " " + *s;
                    }
                }
                if (*kind == OpKind::Open) {
                    if (auto a = need("access")) {
                        auto s = scalar(a, "access");
                        if (s && *s == "read") t.op.access = FileAccess::Read;
                        else if (s && *s == "write") t.op.access = FileAccess::Write;
                        else if (s) error(a, "access '" + *s + "' must be read or write");
                        if (s) text += " " + *s;
                    }
                }
                break;
            }
            case OpKind::Connect:
            case OpKind::Bind:
            case OpKind::Send: {
                if (auto u = c["unix"]) {  // a unix socket: "/path" or "@name", judged as written
                    if (c["addr"] || c["port"] || c["proto"]) error(u, a_case + " names a unix socket or addr/port, not both");
                    if (auto s = scalar(u, "unix")) {
                        if (s->empty() || (!s->starts_with("/") && !s->starts_with("@")))
                            error(u, "unix '" + *s + "' must be a socket path or @name");
                        t.op.unix_addr = *s;
                        text += " unix " + *s;
                    }
                    break;
                }
                if (auto a = need("addr")) {
                    if (auto s = scalar(a, "addr")) {
                        auto ip = parse_ip(*s);
                        if (!ip) error(a, "addr '" + *s + "' is not an IPv4 or IPv6 address");
                        else t.op.addr = *ip;
                        text += " " + *s;
                    }
                }
                if (auto p = need("port")) {
                    if (auto v = integer(p, "port", 65535)) {
                        t.op.port = static_cast<uint16_t>(*v);
                        text += ":" + std::to_string(*v);
                    }
                }
                t.op.proto = *kind == OpKind::Send ? BW_PROTO_UDP : BW_PROTO_TCP;
                if (auto p = c["proto"]) {
                    auto s = scalar(p, "proto");
                    if (s && *s == "tcp") t.op.proto = BW_PROTO_TCP;
                    else if (s && *s == "udp") t.op.proto = BW_PROTO_UDP;
                    else if (s) error(p, "proto '" + *s + "' must be tcp or udp");
                }
                text += t.op.proto == BW_PROTO_UDP ? "/udp" : "/tcp";
                break;
            }
            case OpKind::Socket: {
                if (auto f = need("family")) {
                    if (auto s = scalar(f, "family")) {
                        auto v = parse_family(*s);
                        if (!v) error(f, v.error());
                        else t.op.family = *v;
                        text += " " + *s;
                    }
                }
                if (auto ty = need("type")) {
                    if (auto s = scalar(ty, "type")) {
                        auto v = parse_sock_type(*s);
                        if (!v) error(ty, v.error());
                        else t.op.type = *v;
                        text += " " + *s;
                    }
                }
                break;
            }
            case OpKind::Syscall: {
                if (auto n = need("name")) {
                    if (auto s = scalar(n, "name")) {
                        t.op.syscall = *s;
                        text += " " + *s;
                    }
                }
                if (auto a = c["args"]) {
                    if (!a.IsSequence() || a.size() > 6) {
                        error(a, "args must be a list of at most 6 integers");
                    } else {
                        for (size_t i = 0; i < a.size(); ++i)
                            if (auto v = integer(a[i], "args[" + std::to_string(i) + "]", UINT64_MAX))
                                t.op.args[i] = *v;
                    }
                }
                if (auto a = c["arch"]) {
                    if (auto s = scalar(a, "arch")) {
                        if (auto v = audit_arch_of(*s)) {
                            t.op.arch = *v;
                            if (*s != "native") text += " (" + *s + ")";
                        } else {
                            std::string host;
                            for (const auto& n : host_compat_arch_names()) host += ", " + n;
                            error(a, "arch '" + *s + "' is not an ABI of this host (native" + host + ")");
                        }
                    }
                }
                break;
            }
        }
        if (auto e = need("expect")) {
            auto s = scalar(e, "expect");
            if (s && *s == "allow") t.expect = Verdict::Allow;
            else if (s && *s == "deny") t.expect = Verdict::Deny;
            else if (s && *s == "audit") t.expect = Verdict::Audit;
            else if (s) error(e, "expect '" + *s + "' must be allow, deny or audit");
        }
        t.text = text;
        if (diags.size() != before) return std::nullopt;
        return t;
    }

    std::optional<PolicyTestFile> parse(const YAML::Node& root) {
        PolicyTestFile f;
        f.path = file;
        if (!root.IsMap()) {
            error(root, "a policy test file is a mapping with tool, vars, hosts and cases");
            return std::nullopt;
        }
        keys(root, {"tool", "vars", "hosts", "cases"}, "a policy test file");
        if (auto t = root["tool"]) {
            if (auto s = scalar(t, "tool")) f.tool = *s;
        } else {
            error(root, "missing 'tool'");
        }
        if (auto v = root["vars"]) {
            if (!v.IsMap()) {
                error(v, "vars must be a mapping of workdir, home, tmp, task_id");
            } else {
                for (auto it = v.begin(); it != v.end(); ++it) {
                    auto k = scalar(it->first, "a variable name");
                    auto val = scalar(it->second, "a variable value");
                    if (!k || !val) continue;
                    if (auto ok = check_task_variable(*k, *val); !ok) {
                        error(is_task_variable(*k) ? it->second : it->first, ok.error());
                        continue;
                    }
                    f.vars[*k] = *val;
                }
            }
        }
        if (auto h = root["hosts"]) {
            if (!h.IsMap()) {
                error(h, "hosts must map host names to lists of addresses");
            } else {
                for (auto it = h.begin(); it != h.end(); ++it) {
                    auto k = scalar(it->first, "a host name");
                    if (!k) continue;
                    if (!it->second.IsSequence() || it->second.size() == 0) {
                        error(it->second, "host '" + *k + "' needs a non-empty list of addresses");
                        continue;
                    }
                    std::vector<std::string> addrs;
                    // A node of its own: `it->second` is a member of the
                    // iterator's temporary proxy, gone before a range-for
                    // over it starts (ASan: stack-use-after-scope).
                    const YAML::Node list = it->second;
                    for (const auto& a : list) {
                        auto s = scalar(a, "an address");
                        if (!s) continue;
                        if (!parse_ip(*s)) error(a, "'" + *s + "' is not an IPv4 or IPv6 address");
                        addrs.push_back(*s);
                    }
                    f.hosts[*k] = std::move(addrs);
                }
            }
        }
        auto cases = root["cases"];
        if (!cases) {
            error(root, "missing 'cases'");
        } else if (!cases.IsSequence() || cases.size() == 0) {
            error(cases, "cases must be a non-empty list");
        } else {
            for (const auto& c : cases)
                if (auto t = parse_case(c)) f.cases.push_back(std::move(*t));
        }
        if (!diags.empty()) return std::nullopt;
        return f;
    }
};

std::string verdict_word(Verdict v) { return std::string(to_string(v)); }

}  // namespace

std::string TestDiagnostic::format() const {
    return loc.text() + ": ERROR: " + message;
}

std::expected<PolicyTestFile, std::vector<TestDiagnostic>> parse_policy_test(std::string_view text,
                                                                             std::string file_name) {
    Parser p{file_name, {}};
    YAML::Node root;
    try {
        root = YAML::Load(std::string(text));
    } catch (const YAML::Exception& e) {
        SourceLoc loc{file_name, static_cast<uint32_t>(e.mark.line + 1), static_cast<uint32_t>(e.mark.column + 1)};
        return std::unexpected(std::vector<TestDiagnostic>{{loc, "YAML: " + e.msg}});
    }
    try {
        auto f = p.parse(root);
        if (!f) return std::unexpected(std::move(p.diags));
        return std::move(*f);
    } catch (const YAML::Exception& e) {
        SourceLoc loc{file_name, static_cast<uint32_t>(e.mark.line + 1), static_cast<uint32_t>(e.mark.column + 1)};
        p.diags.push_back({loc, "YAML: " + e.msg});
        return std::unexpected(std::move(p.diags));
    }
}

std::expected<PolicyTestFile, std::vector<TestDiagnostic>> load_policy_test(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in)
        return std::unexpected(std::vector<TestDiagnostic>{{{path.string(), 0, 0}, "cannot read the file"}});
    std::stringstream ss;
    ss << in.rdbuf();
    return parse_policy_test(ss.str(), path.string());
}

size_t PolicyTestReport::passed() const {
    size_t n = 0;
    for (const auto& r : results) n += r.passed;
    return n;
}

size_t PolicyTestReport::failed() const {
    if (!errors.empty() && results.empty()) return 1;
    return results.size() - passed();
}

PolicyTestReport run_policy_test(const PolicyTestFile& file, const Bundle& compiled) {
    PolicyTestReport rep;
    rep.file = file.path;
    rep.tool = file.tool;
    if (compiled.tool != file.tool) {
        rep.errors.push_back({{file.path, 1, 1},
                              "the file tests tool '" + file.tool + "' but the bundle is '" + compiled.tool + "'"});
        return rep;
    }
    Resolver resolve = [&](std::string_view host) -> std::expected<std::vector<std::string>, std::string> {
        auto it = file.hosts.find(host);
        if (it == file.hosts.end())
            return std::unexpected("not listed under hosts: in " + file.path);
        return it->second;
    };
    auto bundle = instantiate(compiled, file.vars, resolve);
    if (!bundle) {
        rep.errors.push_back({{file.path, 1, 1},
                              "cannot instantiate " + file.tool + ": " + bundle.error().message +
                                  (bundle.error().rule_id != BW_NO_RULE
                                       ? " (" + describe_rule(compiled, bundle.error().rule_id) + ")"
                                       : "")});
        return rep;
    }
    for (const auto& c : file.cases) {
        CaseResult r;
        r.test = c;
        r.decision = evaluate(*bundle, c.op);
        r.passed = r.decision.verdict == c.expect;
        rep.results.push_back(std::move(r));
    }
    return rep;
}

std::string format_report(const PolicyTestReport& rep, const Bundle* bundle) {
    std::ostringstream out;
    for (const auto& e : rep.errors) out << e.format() << "\n";
    for (const auto& r : rep.results) {
        out << (r.passed ? "PASS " : "FAIL ") << r.test.loc.file << ":" << r.test.loc.line << ":"
            << r.test.loc.col << " " << r.test.text << " -> " << verdict_word(r.decision.verdict);
        if (!r.passed) out << " (expected " << verdict_word(r.test.expect) << ")";
        out << " by " << (bundle ? describe_rule(*bundle, r.decision.rule_id) : "rule #" + std::to_string(r.decision.rule_id))
            << "\n";
        if (!r.passed) out << "     " << r.decision.explanation << "\n";
    }
    out << rep.file << ": " << rep.passed() << " passed, " << rep.failed() << " failed\n";
    return out.str();
}

std::string report_json(const PolicyTestReport& rep, const Bundle* bundle) {
    nlohmann::json j;
    j["file"] = rep.file;
    j["tool"] = rep.tool;
    j["passed"] = rep.passed();
    j["failed"] = rep.failed();
    j["errors"] = nlohmann::json::array();
    for (const auto& e : rep.errors)
        j["errors"].push_back({{"file", e.loc.file}, {"line", e.loc.line}, {"col", e.loc.col}, {"message", e.message}});
    j["cases"] = nlohmann::json::array();
    for (const auto& r : rep.results) {
        nlohmann::json c = {{"line", r.test.loc.line},
                            {"col", r.test.loc.col},
                            {"case", r.test.text},
                            {"expect", verdict_word(r.test.expect)},
                            {"decision", verdict_word(r.decision.verdict)},
                            {"layer", r.decision.layer},
                            {"passed", r.passed},
                            {"explanation", r.decision.explanation}};
        if (r.decision.rule_id == BW_NO_RULE)
            c["rule"] = nullptr;
        else
            c["rule"] = {{"id", r.decision.rule_id},
                         {"text", bundle ? describe_rule(*bundle, r.decision.rule_id) : ""}};
        j["cases"].push_back(std::move(c));
    }
    return j.dump();
}

}  // namespace bulwark::policy
