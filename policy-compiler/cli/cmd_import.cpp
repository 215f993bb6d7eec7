// policyc import-seccomp PROFILE.json [-o FILE] [--json]
//
// Reads a Docker / OCI seccomp profile and prints the equivalent rule-file
// `syscalls:` section: baseline none plus the profile's rules spelled out,
// so the result can be reviewed and edited like any other rule. What the
// import left out or changed (capability-gated rules, unknown names, ...) is
// printed as comments (YAML) or a "notes" list (JSON).
#include <CLI/CLI.hpp>

#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "bulwark/policy/seccomp.h"

namespace {

using bulwark::policy::SeccompAction;
using bulwark::policy::SeccompSpec;
using bulwark::policy::SyscallArgCond;
using bulwark::policy::SyscallRule;

std::string errno_name(uint16_t e) {
    if (const char* n = strerrorname_np(e)) return n;
    return std::to_string(e);
}

const char* action_word(SeccompAction a) {
    switch (a) {
        case SeccompAction::Allow: return "allow";
        case SeccompAction::Errno: return "errno";
        case SeccompAction::Kill: return "kill";
        case SeccompAction::Log: return "log";
        case SeccompAction::Trap: return "trap";
    }
    return "kill";
}

const char* op_word(SyscallArgCond::Op op) {
    switch (op) {
        case SyscallArgCond::Op::Eq: return "eq";
        case SyscallArgCond::Op::Ne: return "ne";
        case SyscallArgCond::Op::Lt: return "lt";
        case SyscallArgCond::Op::Le: return "le";
        case SyscallArgCond::Op::Gt: return "gt";
        case SyscallArgCond::Op::Ge: return "ge";
        case SyscallArgCond::Op::MaskedEq: return "masked_eq";
    }
    return "eq";
}

nlohmann::ordered_json rule_json(const SyscallRule& r, bool deny) {
    if (r.args.empty() && !deny) return r.name;
    nlohmann::ordered_json j = {{"name", r.name}};
    if (!r.args.empty()) {
        auto& args = j["args"] = nlohmann::ordered_json::array();
        for (const auto& c : r.args) {
            nlohmann::ordered_json a = {{"index", c.index}, {"op", op_word(c.op)}, {"value", c.value}};
            if (c.op == SyscallArgCond::Op::MaskedEq) a["mask"] = c.mask;
            args.push_back(a);
        }
    }
    if (deny) {
        j["action"] = action_word(r.action);
        if (r.action == SeccompAction::Errno) j["errno"] = errno_name(r.errno_value);
    }
    return j;
}

// The section as JSON (also the source of the YAML text).
nlohmann::ordered_json section(const SeccompSpec& spec) {
    nlohmann::ordered_json s;
    s["baseline"] = "none";
    s["allow"] = nlohmann::ordered_json::array();
    s["deny"] = nlohmann::ordered_json::array();
    for (const auto& r : spec.imported)
        (r.action == SeccompAction::Allow ? s["allow"] : s["deny"])
            .push_back(rule_json(r, r.action != SeccompAction::Allow));
    nlohmann::ordered_json v = {{"action", action_word(spec.violation)}};
    if (spec.violation == SeccompAction::Errno) v["errno"] = errno_name(spec.violation_errno);
    s["on_violation"] = v;
    return s;
}

// One flow-style YAML value (names and numbers only, so no quoting needed).
std::string flow(const nlohmann::ordered_json& j) {
    if (j.is_string()) return j.get<std::string>();
    if (j.is_number_unsigned()) return std::to_string(j.get<uint64_t>());
    if (j.is_number_integer()) return std::to_string(j.get<int64_t>());
    std::string out;
    if (j.is_array()) {
        for (const auto& x : j) out += (out.empty() ? "" : ", ") + flow(x);
        return "[" + out + "]";
    }
    for (const auto& [k, x] : j.items()) out += (out.empty() ? "" : ", ") + k + ": " + flow(x);
    return "{ " + out + " }";
}

std::string yaml(const SeccompSpec& spec, const std::string& path) {
    const auto s = section(spec);
    std::ostringstream os;
    os << "# Imported from " << path << " by policyc import-seccomp.\n"
       << "# The profile's non-allow rules are listed under deny, where they win over allows.\n";
    for (const auto& n : spec.notes) {
        std::string line = n;
        for (char& c : line)
            if (c == '\n') c = ' ';
        os << "# note: " << line << "\n";
    }
    os << "syscalls:\n  baseline: none\n";
    for (const char* list : {"allow", "deny"}) {
        if (s[list].empty()) continue;
        os << "  " << list << ":\n";
        for (const auto& r : s[list]) os << "    - " << flow(r) << "\n";
    }
    os << "  on_violation: " << flow(s["on_violation"]) << "\n";
    return os.str();
}

[[noreturn]] void fail(const std::string& message, int code) {
    std::cerr << "policyc: error: " << message << "\n";
    throw CLI::RuntimeError(code);
}

}  // namespace

void register_import_seccomp(CLI::App& app) {
    auto* cmd = app.add_subcommand("import-seccomp",
                                   "print the syscalls: section equivalent to a Docker/OCI seccomp profile");
    auto profile = std::make_shared<std::string>();
    auto output = std::make_shared<std::string>();
    auto as_json = std::make_shared<bool>(false);
    cmd->add_option("PROFILE", *profile, "Docker or OCI seccomp profile (JSON)")->required();
    cmd->add_option("-o,--output", *output, "write the section to this file instead of stdout");
    cmd->add_flag("--json", *as_json, "print JSON ({\"syscalls\": ..., \"notes\": [...]})");
    cmd->callback([profile, output, as_json] {
        std::ifstream in(*profile);
        if (!in) fail("cannot read " + *profile + ": " + std::strerror(errno), 2);
        std::stringstream buf;
        buf << in.rdbuf();
        auto spec = bulwark::policy::import_seccomp_profile(buf.str(), *profile);
        if (!spec) fail(spec.error().message, 1);
        std::string text;
        if (*as_json) {
            nlohmann::ordered_json j = {{"syscalls", section(*spec)}, {"notes", spec->notes}};
            text = j.dump(2) + "\n";
        } else {
            text = yaml(*spec, *profile);
        }
        if (output->empty()) {
            std::cout << text;
            return;
        }
        std::ofstream out(*output);
        out << text;
        if (!out.flush())
            fail("cannot write " + *output + ": " + std::strerror(errno), 2);
    });
}
