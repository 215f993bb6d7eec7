// policyc explain FILE: what the policy allows, section by section, which
// layers enforce each section, and what Landlock cannot express.
#include <iomanip>
#include <iostream>
#include <sstream>

#include "bulwark/policy/values.h"
#include "common.h"

namespace bulwark::policyc {
namespace {

using namespace bulwark::policy;

std::string pad(std::string s, size_t w) {
    if (s.size() < w) s += std::string(w - s.size(), ' ');
    return s;
}

std::string rights(uint32_t bits) {
    if (!bits) return "-";
    return bits == BW_FS_ALL ? "all" : rights_to_string(bits);
}

std::string explain_text(const Bundle& b) {
    std::ostringstream o;
    o << "policy " << b.tool << " (" << (b.mode == Mode::Audit ? "audit: denials are recorded, then allowed" : "enforce")
      << ")\n";
    if (!b.description.empty()) o << "  " << b.description << "\n";
    if (!b.extends.empty()) {
        o << "  extends:";
        for (const auto& e : b.extends) o << " " << e;
        o << "\n";
    }
    o << "  mandatory layers: ";
    if (b.mandatory_layers.empty()) o << "none (the run proceeds on the layers the host has)";
    for (size_t i = 0; i < b.mandatory_layers.size(); ++i) o << (i ? ", " : "") << b.mandatory_layers[i];
    o << "\n  hash: " << b.hash << "\n\n";

    o << "binaries (supervisor checks what the tool is started as)\n";
    if (b.binaries.empty()) o << "  (none listed)\n";
    for (const auto& x : b.binaries)
        o << "  " << pad(x.path, 40) << (x.sha256 ? "sha256 " + x.sha256->substr(0, 16) + "..." : "any content") << "\n";

    o << "\nfiles (BPF LSM, Landlock)";
    bool files = b.bpf.header.flags & BW_POL_FILES_ENFORCED;
    bool exec = b.bpf.header.flags & BW_POL_EXEC_ENFORCED;
    o << (files ? ": everything not listed is denied\n" : ": no file rules, file access is not restricted\n");
    if (!b.bpf.files.empty()) {
        o << "  " << pad("path", 40) << pad("allow", 28) << pad("deny", 28) << "rule\n";
        for (const auto& f : b.bpf.files) {
            uint32_t rule = f.value.allow_rule_id != BW_NO_RULE ? f.value.allow_rule_id : f.value.deny_rule_id;
            o << "  " << pad(f.path, 40) << pad(rights(f.value.allow), 28)
              << pad(rights(f.value.deny), 28) << rule_where(b, rule) << "\n";
        }
    }
    o << "\nexec (BPF LSM, Landlock): "
      << (exec ? "only paths with the exec right may be executed\n"
               : files ? "paths with the exec right (files.exec)\n" : "not restricted\n");

    o << "\nnetwork (network namespace, cgroup sock_addr and sock_create, Landlock TCP ports)\n";
    const auto& n = b.network;
    o << "  mode: " << (n.mode == NetMode::None ? "none" : n.mode == NetMode::Loopback ? "loopback only" : "rules")
      << "; socket families: " << family_names(n.af_allow) << "\n";
    for (const auto& r : n.rules) o << "  " << pad(format_net_rule(r), 64) << rule_where(b, r.rule_id) << "\n";
    if (!n.dns.empty()) {
        o << "  dns resolvers:";
        for (const auto& d : n.dns) o << " " << d;
        o << "\n";
    }
    if (n.mode == NetMode::Rules) o << "  anything not allowed is denied; deny rules override allows\n";

    const auto& s = b.syscalls;
    o << "\nsyscalls (seccomp)\n  baseline: " << s.baseline << "; on violation: " << action_name(s.violation, s.violation_errno)
      << "\n";
    if (!s.allow.empty()) {
        o << "  allow:";
        for (const auto& [name, _] : s.allow) o << " " << name;
        o << "\n";
    }
    if (!s.deny.empty()) {
        o << "  deny:";
        for (const auto& [name, _] : s.deny) o << " " << name;
        o << "\n";
    }
    o << "  filter: " << b.seccomp.program.size() << " instructions\n";

    const auto& L = b.limits;
    o << "\nlimits (cgroup, rlimits, supervisor)\n";
    bool any = false;
    auto line = [&](const char* name, const std::string& v) {
        o << "  " << pad(name, 12) << v << "\n";
        any = true;
    };
    if (L.memory_bytes) line("memory", format_size(*L.memory_bytes));
    if (L.pids) line("pids", std::to_string(*L.pids));
    if (L.cpu_percent) line("cpu", std::to_string(*L.cpu_percent) + "% of one CPU");
    if (L.timeout_ms) line("timeout", format_duration(*L.timeout_ms));
    if (L.output_bytes) line("output", format_size(*L.output_bytes));
    if (L.file_size_bytes) line("file_size", format_size(*L.file_size_bytes));
    if (L.open_files) line("open_files", std::to_string(*L.open_files));
    if (!any) o << "  (none)\n";

    const auto& h = b.hardening;
    o << "\nhardening (supervisor at launch)\n  mte: "
      << (h.mte == MteMode::Off ? "off" : h.mte == MteMode::Async ? "async" : "sync") << "\n";
    std::string req, warn;
    for (const auto& [p, r] : h.properties) (r == Requirement::Require ? req : warn) += " " + p;
    if (!req.empty()) o << "  require:" << req << "\n";
    if (!warn.empty()) o << "  warn:" << warn << "\n";
    if (h.disable_store_bypass || h.disable_indirect_branch)
        o << "  speculation:" << (h.disable_store_bypass ? " store_bypass disabled" : "")
          << (h.disable_indirect_branch ? " indirect_branch disabled" : "") << "\n";

    o << "\nenvironment (supervisor)\n  " << (b.env.clear_all ? "starts empty" : "inherits the caller's environment")
      << "\n";
    if (!b.env.pass.empty()) {
        o << "  pass:";
        for (const auto& p : b.env.pass) o << " " << p;
        o << "\n";
    }
    for (const auto& [k, v] : b.env.set) o << "  set " << k << "=" << v << "\n";

    o << "\nLandlock: " << b.landlock.paths.size() << " path rules, " << b.landlock.ports.size() << " port rules\n";
    if (b.landlock.gaps.empty()) o << "  no gaps: Landlock expresses every file and TCP rule\n";
    for (const auto& g : b.landlock.gaps) o << "  gap: " << g << "\n";
    return o.str();
}

std::function<int()> setup(CLI::App& sub, CommonOptions& common) {
    auto file = std::make_shared<std::string>();
    sub.add_option("file", *file, "rule file, or a compiled bundle (.json)")->required();
    return [file, &common] {
        auto b = load_policy(*file, common, std::cerr);
        if (!b) return b.error();
        if (common.json) {
            nlohmann::json layers = {{"files", {"bpf-lsm", "landlock"}},
                                     {"exec", {"bpf-lsm", "landlock"}},
                                     {"network", {"namespaces", "sock-addr", "landlock"}},
                                     {"syscalls", {"seccomp"}},
                                     {"limits", {"cgroup"}},
                                     {"hardening", {"supervisor"}},
                                     {"environment", {"supervisor"}}};
            std::cout << nlohmann::json{{"bundle", bundle_to_json(*b)}, {"layers", layers},
                                        {"landlock_gaps", b->landlock.gaps}}
                             .dump(2)
                      << "\n";
            return 0;
        }
        std::cout << explain_text(*b);
        return 0;
    };
}

const bool registered = register_command({"explain", "explain a policy: what it allows and which layers enforce it", setup});

}  // namespace
}  // namespace bulwark::policyc
