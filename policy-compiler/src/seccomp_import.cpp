// import_seccomp_profile(): Docker / OCI runtime-spec seccomp profiles as a
// spec baseline, and Docker's default profile (data/docker-default-seccomp.json)
// through the same path.
//
// Conditions follow Docker's own reading of a profile (moby
// profiles/seccomp/seccomp_linux.go): `excludes` first, then `includes`;
// arches compare against the host's Go arch name, minKernel against the
// running kernel, caps against the capabilities the tool will hold, which in
// a Bulwark sandbox is none. Every field is understood or refused: nothing is
// dropped without an error or a note.
#include <sys/utsname.h>

#include <algorithm>
#include <cstdio>
#include "seccomp_format.h"
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "bulwark/policy/seccomp.h"
#include "seccomp_internal.h"

namespace bulwark::policy {

extern const std::string_view kDockerDefaultSeccompProfile;

namespace {

using nlohmann::json;

std::unexpected<SeccompError> error(std::string msg) {
    return std::unexpected(SeccompError{0, std::move(msg)});
}

struct Action {
    SeccompAction action;
    bool kill_thread = false;
};

std::expected<Action, SeccompError> parse_action(const std::string& s, std::string_view where) {
    if (s == "SCMP_ACT_ALLOW") return Action{SeccompAction::Allow};
    if (s == "SCMP_ACT_ERRNO") return Action{SeccompAction::Errno};
    if (s == "SCMP_ACT_KILL_PROCESS") return Action{SeccompAction::Kill};
    if (s == "SCMP_ACT_KILL" || s == "SCMP_ACT_KILL_THREAD") return Action{SeccompAction::Kill, true};
    if (s == "SCMP_ACT_TRAP") return Action{SeccompAction::Trap};
    if (s == "SCMP_ACT_LOG") return Action{SeccompAction::Log};
    if (s == "SCMP_ACT_TRACE" || s == "SCMP_ACT_NOTIFY")
        return error(detail::format("{}: action {} is not supported (Bulwark does not trace or "
                                 "notify from seccomp)",
                                 where, s));
    return error(detail::format("{}: unknown action '{}'", where, s));
}

std::expected<SyscallArgCond::Op, SeccompError> parse_op(const std::string& s,
                                                         std::string_view where) {
    using Op = SyscallArgCond::Op;
    if (s == "SCMP_CMP_EQ") return Op::Eq;
    if (s == "SCMP_CMP_NE") return Op::Ne;
    if (s == "SCMP_CMP_LT") return Op::Lt;
    if (s == "SCMP_CMP_LE") return Op::Le;
    if (s == "SCMP_CMP_GT") return Op::Gt;
    if (s == "SCMP_CMP_GE") return Op::Ge;
    if (s == "SCMP_CMP_MASKED_EQ") return Op::MaskedEq;
    return error(detail::format("{}: unknown op '{}'", where, s));
}

std::expected<void, SeccompError> only_keys(const json& obj, std::initializer_list<std::string_view> allowed,
                                            std::string_view where) {
    if (!obj.is_object()) return error(detail::format("{}: expected an object", where));
    std::vector<std::string> unknown;
    for (const auto& [k, v] : obj.items())
        if (std::ranges::find(allowed, std::string_view(k)) == allowed.end()) unknown.push_back(k);
    if (unknown.empty()) return {};
    std::string list;
    for (const auto& k : unknown) list += (list.empty() ? "" : ", ") + k;
    return error(detail::format("{}: unsupported field(s): {}", where, list));
}

std::expected<std::vector<std::string>, SeccompError> string_list(const json& v,
                                                                  std::string_view where) {
    std::vector<std::string> out;
    if (v.is_null()) return out;
    if (!v.is_array()) return error(detail::format("{}: expected a list of strings", where));
    for (const auto& s : v) {
        if (!s.is_string()) return error(detail::format("{}: expected a list of strings", where));
        out.push_back(s.get<std::string>());
    }
    return out;
}

std::expected<uint64_t, SeccompError> unsigned_value(const json& v, std::string_view where) {
    if (v.is_number_unsigned()) return v.get<uint64_t>();
    if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
    return error(detail::format("{}: expected a non-negative integer", where));
}

// "major.minor" of the running kernel.
std::pair<int, int> running_kernel() {
    utsname u{};
    int major = 0, minor = 0;
    if (uname(&u) == 0) std::sscanf(u.release, "%d.%d", &major, &minor);
    return {major, minor};
}

std::expected<std::pair<int, int>, SeccompError> parse_kernel(const json& v, std::string_view where) {
    if (!v.is_string()) return error(detail::format("{}: minKernel must be a string like \"4.8\"", where));
    int major = 0, minor = 0;
    char extra = 0;
    const std::string s = v.get<std::string>();
    if (std::sscanf(s.c_str(), "%d.%d%c", &major, &minor, &extra) != 2 || major < 0 || minor < 0)
        return error(detail::format("{}: minKernel '{}' is not <major>.<minor>", where, s));
    return std::pair{major, minor};
}

struct Filter {
    std::vector<std::string> caps, arches;
    std::optional<std::pair<int, int>> min_kernel;
};

std::expected<Filter, SeccompError> parse_filter(const json& v, std::string_view where) {
    Filter f;
    if (v.is_null()) return f;
    if (auto ok = only_keys(v, {"caps", "arches", "minKernel"}, where); !ok) return std::unexpected(ok.error());
    if (v.contains("caps")) {
        auto c = string_list(v["caps"], detail::format("{}.caps", where));
        if (!c) return std::unexpected(c.error());
        f.caps = *c;
    }
    if (v.contains("arches")) {
        auto a = string_list(v["arches"], detail::format("{}.arches", where));
        if (!a) return std::unexpected(a.error());
        f.arches = *a;
    }
    if (v.contains("minKernel") && !v["minKernel"].is_null()) {
        auto k = parse_kernel(v["minKernel"], where);
        if (!k) return std::unexpected(k.error());
        f.min_kernel = *k;
    }
    return f;
}

std::string join(const std::vector<std::string>& v) {
    std::string out;
    for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
    return out;
}

using Imported = std::expected<void, SeccompError>;

// One profile read step by step (import_seccomp_profile orders them).
struct ProfileImport {
    ProfileImport(const json& doc, std::string name) : doc(doc), name(std::move(name)) {
        spec.baseline = SeccompSpec::Baseline::Imported;
        spec.import_name = this->name;
    }

    Imported refuse_unsupported();
    Imported default_action();
    Imported architectures();
    Imported syscalls();
    void summarise();

    const json& doc;
    const std::string name;
    SeccompSpec spec;
    const std::string goarch{detail::host_goarch()};
    const std::pair<int, int> kernel = running_kernel();
    std::set<std::string> unknown_names;
    size_t other_arch_rules = 0;

private:
    std::expected<std::vector<SyscallArgCond>, SeccompError> arg_conditions(const json& call, const std::string& where);
    bool applies_here(const Filter& incl, const Filter& excl, const std::string& where,
                      const std::vector<std::string>& names);
    Imported syscall_rule(const json& call, const std::string& where);
};

// Seccomp flags and user notification: agentd installs the filter itself.
Imported ProfileImport::refuse_unsupported() {
    if (auto ok = only_keys(doc, {"defaultAction", "defaultErrnoRet", "architectures", "archMap",
                                  "syscalls", "flags", "listenerPath", "listenerMetadata"},
                            name);
        !ok)
        return std::unexpected(ok.error());
    for (const char* k : {"flags"}) {
        if (doc.contains(k) && !(doc[k].is_null() || (doc[k].is_array() && doc[k].empty())))
            return error(detail::format("{}: '{}' is not supported (the filter is installed by agentd "
                                     "with its own flags)",
                                     name, k));
    }
    for (const char* k : {"listenerPath", "listenerMetadata"}) {
        if (doc.contains(k) && !(doc[k].is_null() || (doc[k].is_string() && doc[k].get<std::string>().empty())))
            return error(detail::format("{}: '{}' is not supported (no seccomp user notification)", name, k));
    }
    return {};
}

// defaultAction (never allow: a baseline denies by default) and its errno.
Imported ProfileImport::default_action() {
    if (!doc.contains("defaultAction") || !doc["defaultAction"].is_string())
        return error(detail::format("{}: defaultAction is required", name));
    auto def = parse_action(doc["defaultAction"].get<std::string>(), detail::format("{}: defaultAction", name));
    if (!def) return std::unexpected(def.error());
    if (def->action == SeccompAction::Allow)
        return error(detail::format("{}: defaultAction SCMP_ACT_ALLOW makes a deny-list profile; a "
                                 "Bulwark baseline must deny by default",
                                 name));
    if (def->kill_thread)
        spec.notes.push_back(detail::format("defaultAction {} kills the whole process, not one thread",
                                         doc["defaultAction"].get<std::string>()));
    spec.violation = def->action;
    spec.violation_errno = 0;
    if (doc.contains("defaultErrnoRet") && !doc["defaultErrnoRet"].is_null()) {
        if (def->action != SeccompAction::Errno)
            return error(detail::format("{}: defaultErrnoRet needs defaultAction SCMP_ACT_ERRNO", name));
        auto e = unsigned_value(doc["defaultErrnoRet"], detail::format("{}: defaultErrnoRet", name));
        if (!e) return std::unexpected(e.error());
        if (*e == 0 || *e > 4095) return error(detail::format("{}: defaultErrnoRet {} out of range (1..4095)", name, *e));
        spec.violation_errno = static_cast<uint16_t>(*e);
    } else if (def->action == SeccompAction::Errno) {
        spec.violation_errno = EPERM;  // runc's default for SCMP_ACT_ERRNO
    }
    return {};
}

// Architectures: the filter always covers this host's arches (x32 refused);
// the profile's list is checked for sense and reported.
Imported ProfileImport::architectures() {
    std::vector<std::string> arches;
    if (doc.contains("architectures")) {
        auto a = string_list(doc["architectures"], detail::format("{}: architectures", name));
        if (!a) return std::unexpected(a.error());
        arches = *a;
    }
    if (doc.contains("archMap") && !doc["archMap"].is_null()) {
        if (!doc["archMap"].is_array()) return error(detail::format("{}: archMap must be a list", name));
        for (const auto& m : doc["archMap"]) {
            if (auto ok = only_keys(m, {"architecture", "subArchitectures"}, detail::format("{}: archMap", name)); !ok)
                return std::unexpected(ok.error());
            if (!m.contains("architecture") || !m["architecture"].is_string())
                return error(detail::format("{}: archMap entry without architecture", name));
            auto subs = string_list(m.contains("subArchitectures") ? m["subArchitectures"] : json(),
                                    detail::format("{}: archMap.subArchitectures", name));
            if (!subs) return std::unexpected(subs.error());
            const std::string a = m["architecture"].get<std::string>();
            const std::string native = seccomp_arch_native() == SCMP_ARCH_X86_64   ? "SCMP_ARCH_X86_64"
                                       : seccomp_arch_native() == SCMP_ARCH_AARCH64 ? "SCMP_ARCH_AARCH64"
                                                                                    : "";
            if (a == native) {
                arches.push_back(a);
                arches.insert(arches.end(), subs->begin(), subs->end());
            }
        }
    }
    for (const auto& a : arches) {
        std::string lower = a.starts_with("SCMP_ARCH_") ? a.substr(10) : a;
        std::ranges::transform(lower, lower.begin(), [](char c) { return static_cast<char>(std::tolower(c)); });
        if (seccomp_arch_resolve_name(lower.c_str()) == 0)
            return error(detail::format("{}: unknown architecture '{}'", name, a));
        if (a == "SCMP_ARCH_X32")
            spec.notes.push_back("SCMP_ARCH_X32 listed: x32 syscalls are still refused (Bulwark "
                                 "never allows the x32 ABI)");
    }
    return {};
}

// The argument comparisons of one rule (libseccomp's: at most one per
// argument, valueTwo only with SCMP_CMP_MASKED_EQ).
std::expected<std::vector<SyscallArgCond>, SeccompError> ProfileImport::arg_conditions(const json& call,
                                                                                        const std::string& where) {
    std::vector<SyscallArgCond> args;
    if (call.contains("args") && !call["args"].is_null()) {
        if (!call["args"].is_array()) return error(where + ".args must be a list");
        std::set<uint64_t> seen;
        for (const auto& a : call["args"]) {
            if (auto ok = only_keys(a, {"index", "value", "valueTwo", "op"}, where + ".args"); !ok)
                return std::unexpected(ok.error());
            if (!a.contains("index") || !a.contains("op") || !a["op"].is_string())
                return error(where + ".args: index and op are required");
            auto index = unsigned_value(a["index"], where + ".args.index");
            if (!index) return std::unexpected(index.error());
            if (*index > 5) return error(detail::format("{}.args: index {} (must be 0..5)", where, *index));
            if (!seen.insert(*index).second)
                return error(detail::format("{}.args: argument {} compared twice; libseccomp "
                                         "cannot AND two comparisons of one argument",
                                         where, *index));
            auto op = parse_op(a["op"].get<std::string>(), where + ".args");
            if (!op) return std::unexpected(op.error());
            uint64_t value = 0, value_two = 0;
            if (a.contains("value")) {
                auto v = unsigned_value(a["value"], where + ".args.value");
                if (!v) return std::unexpected(v.error());
                value = *v;
            }
            if (a.contains("valueTwo")) {
                auto v = unsigned_value(a["valueTwo"], where + ".args.valueTwo");
                if (!v) return std::unexpected(v.error());
                value_two = *v;
            }
            SyscallArgCond c;
            c.index = static_cast<uint8_t>(*index);
            c.op = *op;
            if (*op == SyscallArgCond::Op::MaskedEq) {
                c.mask = value;  // libseccomp: (arg & datum_a) == datum_b
                c.value = value_two;
            } else {
                if (value_two != 0)
                    return error(where + ".args: valueTwo is only meaningful with SCMP_CMP_MASKED_EQ");
                c.value = value;
            }
            args.push_back(c);
        }
    }
    return args;
}

// Whether a rule's includes/excludes let it apply on this host (arch,
// kernel, capabilities: the tool holds none); a rule left out for a reason
// worth reading is noted.
bool ProfileImport::applies_here(const Filter& incl, const Filter& excl, const std::string& where,
                                 const std::vector<std::string>& names) {
    // excludes.caps never match: the tool holds no capabilities.
    if (!excl.arches.empty() && std::ranges::find(excl.arches, goarch) != excl.arches.end()) {
        ++other_arch_rules;
        return false;
    }
    if (excl.min_kernel && kernel >= *excl.min_kernel) {
        spec.notes.push_back(detail::format("{} ({}): excluded on kernels >= {}.{}; this one is {}.{}",
                                         where, join(names), excl.min_kernel->first,
                                         excl.min_kernel->second, kernel.first, kernel.second));
        return false;
    }
    if (!incl.arches.empty() && std::ranges::find(incl.arches, goarch) == incl.arches.end()) {
        ++other_arch_rules;
        return false;
    }
    if (!incl.caps.empty()) {
        spec.notes.push_back(detail::format("{} ({}): needs {}; left out, the sandbox drops every capability",
                                         where, join(names), join(incl.caps)));
        return false;
    }
    if (incl.min_kernel && kernel < *incl.min_kernel) {
        spec.notes.push_back(detail::format("{} ({}): needs kernel >= {}.{}; this one is {}.{}",
                                         where, join(names), incl.min_kernel->first,
                                         incl.min_kernel->second, kernel.first, kernel.second));
        return false;
    }
    return true;
}

// One entry of `syscalls`: its names, action, errno and arguments, kept when
// it applies here.
Imported ProfileImport::syscall_rule(const json& call, const std::string& where) {
    if (auto ok = only_keys(call, {"names", "name", "action", "errnoRet", "args", "comment",
                                   "includes", "excludes"},
                            where);
        !ok)
        return std::unexpected(ok.error());
    std::vector<std::string> names;
    if (call.contains("names")) {
        auto n = string_list(call["names"], where + ".names");
        if (!n) return std::unexpected(n.error());
        names = *n;
    }
    if (call.contains("name")) {
        if (!call["name"].is_string()) return error(where + ".name: expected a string");
        names.push_back(call["name"].get<std::string>());
    }
    if (names.empty()) return error(where + ": no syscall names");
    if (!call.contains("action") || !call["action"].is_string())
        return error(where + ": action is required");
    auto act = parse_action(call["action"].get<std::string>(), where);
    if (!act) return std::unexpected(act.error());

    uint16_t err = 0;
    if (call.contains("errnoRet") && !call["errnoRet"].is_null()) {
        if (act->action != SeccompAction::Errno)
            return error(where + ": errnoRet needs action SCMP_ACT_ERRNO");
        auto e = unsigned_value(call["errnoRet"], where + ".errnoRet");
        if (!e) return std::unexpected(e.error());
        if (*e == 0 || *e > 4095) return error(detail::format("{}.errnoRet {} out of range (1..4095)", where, *e));
        err = static_cast<uint16_t>(*e);
    } else if (act->action == SeccompAction::Errno) {
        err = EPERM;
    }
    auto args = arg_conditions(call, where);
    if (!args) return std::unexpected(args.error());
    auto excl = parse_filter(call.contains("excludes") ? call["excludes"] : json(), where + ".excludes");
    if (!excl) return std::unexpected(excl.error());
    auto incl = parse_filter(call.contains("includes") ? call["includes"] : json(), where + ".includes");
    if (!incl) return std::unexpected(incl.error());
    if (!applies_here(*incl, *excl, where, names)) return {};
    if (act->kill_thread)
        spec.notes.push_back(detail::format("{}: {} kills the whole process, not one thread", where,
                                         call["action"].get<std::string>()));

    for (const auto& n : names) {
        if (!is_known_syscall(n)) {
            unknown_names.insert(n);
            continue;
        }
        if (n == "clone3" && act->action == SeccompAction::Allow) {
            spec.notes.push_back(detail::format("{}: clone3 is answered ENOSYS (seccomp cannot "
                                             "read its flags); libc falls back to clone",
                                             where));
            continue;
        }
        if (n == "openat2" && act->action == SeccompAction::Allow) {
            spec.notes.push_back(detail::format("{}: openat2 is answered ENOSYS (seccomp cannot "
                                             "read the mode in its struct); callers fall back to openat",
                                             where));
            continue;
        }
        SyscallRule r;
        r.name = n;
        r.args = *args;
        r.action = act->action;
        r.errno_value = err;
        spec.imported.push_back(std::move(r));
    }
    return {};
}

Imported ProfileImport::syscalls() {
    if (!doc.contains("syscalls") || doc["syscalls"].is_null()) return {};
    if (!doc["syscalls"].is_array()) return error(detail::format("{}: syscalls must be a list", name));
    size_t idx = 0;
    for (const auto& call : doc["syscalls"])
        if (auto ok = syscall_rule(call, detail::format("{}: syscalls[{}]", name, idx++)); !ok) return ok;
    return {};
}

// What was left out, said once.
void ProfileImport::summarise() {
    if (other_arch_rules)
        spec.notes.push_back(detail::format("{} rule(s) for other architectures than {} skipped",
                                         other_arch_rules, goarch));
    if (!unknown_names.empty()) {
        std::vector<std::string> v(unknown_names.begin(), unknown_names.end());
        spec.notes.push_back(detail::format("syscalls unknown to libseccomp {}.{}.{} left out (answered "
                                         "with the default action): {}",
                                         seccomp_version()->major, seccomp_version()->minor,
                                         seccomp_version()->micro, join(v)));
    }
}

}  // namespace

std::expected<SeccompSpec, SeccompError> import_seccomp_profile(std::string_view text, std::string name) {
    json doc;
    try {
        doc = json::parse(text);
    } catch (const json::exception& e) {  // parse_error, and out_of_range for a number no double holds
        return error(detail::format("{}: not valid JSON: {}", name, e.what()));
    }
    ProfileImport in(doc, std::move(name));
    static constexpr Imported (ProfileImport::*kSteps[])() = {
        &ProfileImport::refuse_unsupported,
        &ProfileImport::default_action,
        &ProfileImport::architectures,
        &ProfileImport::syscalls,
    };
    for (auto step : kSteps)
        if (auto ok = (in.*step)(); !ok) return std::unexpected(ok.error());
    in.summarise();
    return std::move(in.spec);
}

std::vector<SyscallRule> docker_default_rules() {
    static const std::vector<SyscallRule> rules = [] {
        auto spec = import_seccomp_profile(kDockerDefaultSeccompProfile, "docker-default");
        // The profile is embedded data checked by unit tests; failing to read
        // it leaves the baseline empty, which denies everything (fail closed).
        return spec ? spec->imported : std::vector<SyscallRule>{};
    }();
    return rules;
}

}  // namespace bulwark::policy
