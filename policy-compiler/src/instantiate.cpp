#include "bulwark/policy/instantiate.h"

#include <algorithm>

#include "bulwark/policy/bpf_tables.h"
#include "bulwark/policy/match.h"

namespace bulwark::policy {

namespace {

constexpr std::string_view kVarNames[] = {"workdir", "home", "tmp", "task_id"};

bool task_id_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
}

InstantiateError err(uint32_t rule, std::string msg) { return InstantiateError{rule, std::move(msg)}; }

}  // namespace

TaskVars task_vars(std::string workdir, std::string task_id, std::optional<std::string> home) {
    TaskVars v;
    v["home"] = home ? std::move(*home) : workdir;
    v["workdir"] = std::move(workdir);
    v["tmp"] = "/tmp";
    v["task_id"] = std::move(task_id);
    return v;
}

bool is_task_variable(std::string_view name) {
    return std::find(std::begin(kVarNames), std::end(kVarNames), name) != std::end(kVarNames);
}

std::expected<void, std::string> check_task_variable(std::string_view name, std::string_view value) {
    if (!is_task_variable(name)) return std::unexpected("unknown variable ${" + std::string(name) + "}");
    if (name == "task_id") {
        if (value.empty() || value.size() > 64 || !std::all_of(value.begin(), value.end(), task_id_char))
            return std::unexpected("task_id '" + std::string(value) +
                                   "' must match [A-Za-z0-9._-]{1,64}");
        if (value == "." || value == "..")
            return std::unexpected("task_id '" + std::string(value) + "' would name a directory link");
        return {};
    }
    if (!value.starts_with("/"))
        return std::unexpected("${" + std::string(name) + "}: '" + std::string(value) + "' is not an absolute path");
    auto n = normalise_path(value);
    if (!n) return std::unexpected("${" + std::string(name) + "} = '" + std::string(value) + "': " + n.error());
    if (*n != value || value.find("/../") != std::string_view::npos || value.ends_with("/.."))
        return std::unexpected("${" + std::string(name) + "} = '" + std::string(value) +
                               "' is not a normalised path (it would be '" + *n + "')");
    if (*n == "/")
        return std::unexpected("${" + std::string(name) +
                               "} = '/' would make its rules cover the whole filesystem");
    return {};
}

std::expected<std::string, std::string> substitute_value(std::string_view value,
                                                         const TaskVars& vars) {
    std::string out;
    size_t i = 0;
    while (i < value.size()) {
        if (value[i] == '$' && i + 1 < value.size() && value[i + 1] == '{') {
            size_t close = value.find('}', i + 2);
            if (close == std::string_view::npos)
                return std::unexpected("unterminated variable in '" + std::string(value) + "'");
            std::string_view name = value.substr(i + 2, close - i - 2);
            if (!is_task_variable(name))
                return std::unexpected("unknown variable ${" + std::string(name) + "} in '" +
                                       std::string(value) + "'");
            auto it = vars.find(name);
            if (it == vars.end())
                return std::unexpected("variable ${" + std::string(name) + "} used by '" +
                                       std::string(value) + "' has no value for this task");
            out += it->second;
            i = close + 1;
            continue;
        }
        out += value[i++];
    }
    return out;
}

std::expected<std::string, std::string> substitute_path(std::string_view path, const TaskVars& vars) {
    auto s = substitute_value(path, vars);
    if (!s) return s;
    // Variables were validated as normalised; a ".." in the rule text itself
    // was rejected by the compiler. Refuse rather than resolve one here.
    if (!s->starts_with("/"))
        return std::unexpected("'" + std::string(path) + "' becomes '" + *s + "', which is not an absolute path");
    auto n = normalise_path(*s);
    if (!n) return std::unexpected("'" + std::string(path) + "' becomes '" + *s + "': " + n.error());
    for (size_t i = 0; i < s->size();) {
        size_t j = s->find('/', i);
        if (j == std::string::npos) j = s->size();
        if (std::string_view(*s).substr(i, j - i) == "..")
            return std::unexpected("'" + std::string(path) + "' becomes '" + *s +
                                   "', which climbs with '..'");
        i = j + 1;
    }
    return *n;
}

bool is_instantiated(const Bundle& b) {
    auto has_var = [](const std::string& s) { return s.find("${") != std::string::npos; };
    for (const auto& f : b.files)
        if (has_var(f.path)) return false;
    for (const auto& p : b.landlock.paths)
        if (has_var(p.path)) return false;
    for (const auto& e : b.env.set)
        if (has_var(e.second)) return false;
    for (const auto& bin : b.binaries)
        if (has_var(bin.path)) return false;
    for (const auto& r : b.network.rules)
        if (r.host) return false;
    for (const auto& u : b.network.unix_rules)
        if (has_var(u.address)) return false;
    return true;
}

std::expected<Bundle, InstantiateError> instantiate(const Bundle& in, const TaskVars& vars,
                                                    const Resolver& resolve) {
    for (const auto& [name, value] : vars)
        if (auto ok = check_task_variable(name, value); !ok) return std::unexpected(err(BW_NO_RULE, ok.error()));

    Bundle b = in;
    for (auto& f : b.files) {
        auto p = substitute_path(f.path, vars);
        if (!p) return std::unexpected(err(f.rule_id, p.error()));
        f.path = *p;
    }
    for (auto& l : b.landlock.paths) {
        auto p = substitute_path(l.path, vars);
        if (!p) return std::unexpected(err(l.rule_id, p.error()));
        l.path = *p;
    }
    for (auto& bin : b.binaries) {
        auto p = substitute_path(bin.path, vars);
        if (!p) return std::unexpected(err(bin.rule_id, p.error()));
        bin.path = *p;
    }
    for (auto& u : b.network.unix_rules) {
        if (u.address.starts_with("@")) continue;
        const bool dir = u.address.size() > 1 && u.address.ends_with("/");
        auto p = substitute_path(u.address, vars);
        if (!p) return std::unexpected(err(u.rule_id, p.error()));
        u.address = *p + (dir && *p != "/" ? "/" : "");
        if (auto k = unix_rule_key(u.address); !k) return std::unexpected(err(u.rule_id, "network.unix " + u.address + ": " + k.error()));
        if (std::string why = unix_rule_check(b, u); !why.empty())
            return std::unexpected(err(u.rule_id, "network.unix " + u.address + ": " + why));
    }
    for (auto& [name, value] : b.env.set) {
        auto v = substitute_value(value, vars);
        if (!v) return std::unexpected(err(BW_NO_RULE, "environment." + name + ": " + v.error()));
        value = *v;
    }

    std::vector<NetRule> rules;
    for (const auto& r : b.network.rules) {
        if (!r.host) {
            rules.push_back(r);
            continue;
        }
        if (!resolve)
            return std::unexpected(err(r.rule_id, "host '" + *r.host + "' needs a resolver"));
        auto addrs = resolve(*r.host);
        if (!addrs)
            return std::unexpected(err(r.rule_id, "host '" + *r.host + "' did not resolve: " + addrs.error()));
        if (addrs->empty())
            return std::unexpected(err(r.rule_id, "host '" + *r.host + "' resolved to no address"));
        for (const auto& text : *addrs) {
            auto a = parse_ip(text);
            if (!a)
                return std::unexpected(err(r.rule_id, "host '" + *r.host + "' resolved to '" + text +
                                                          "', which is not an IP address"));
            NetRule c;  // field by field: copying the optional host trips GCC 12's
                        // -Wmaybe-uninitialized
            c.port_lo = r.port_lo;
            c.port_hi = r.port_hi;
            c.proto_mask = r.proto_mask;
            c.op_mask = r.op_mask;
            c.action = r.action;
            c.rule_id = r.rule_id;
            c.addr = *a;
            c.prefix = 128;
            bool dup = std::any_of(rules.begin(), rules.end(), [&](const NetRule& o) {
                return !o.host && o.addr == c.addr && o.prefix == 128 && o.port_lo == c.port_lo &&
                       o.port_hi == c.port_hi && o.proto_mask == c.proto_mask &&
                       o.op_mask == c.op_mask && o.action == c.action && o.rule_id == c.rule_id;
            });
            if (!dup) rules.push_back(c);
        }
    }
    b.network.rules = std::move(rules);

    if (auto ok = rebuild_bpf_tables(b); !ok) return std::unexpected(err(BW_NO_RULE, ok.error()));
    return b;
}

}  // namespace bulwark::policy
