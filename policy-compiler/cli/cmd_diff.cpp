// policyc diff A B: semantic differences between two policies (rule files
// or compiled bundles). Exit 0: same; 1: different; 2: error.
#include <iostream>
#include <map>

#include "bulwark/policy/values.h"
#include "common.h"

namespace bulwark::policyc {
namespace {

using namespace bulwark::policy;

// Every observable decision of a policy as "section key" -> value.
std::map<std::string, std::string> facts(const Bundle& b) {
    std::map<std::string, std::string> f;
    f["mode"] = b.mode == Mode::Audit ? "audit" : "enforce";
    std::string layers;
    for (const auto& l : b.mandatory_layers) layers += (layers.empty() ? "" : ", ") + l;
    f["mandatory layers"] = layers.empty() ? "none" : layers;
    for (const auto& x : b.binaries) f["binary " + x.path] = x.sha256 ? "sha256 " + *x.sha256 : "any content";
    f["files enforced"] = (b.bpf.header.flags & BW_POL_FILES_ENFORCED) ? "yes" : "no";
    f["exec enforced"] = (b.bpf.header.flags & BW_POL_EXEC_ENFORCED) ? "yes" : "no";
    for (const auto& e : b.bpf.files) {
        if (e.value.allow) f["files " + e.path + " allow"] = rights_to_string(e.value.allow);
        if (e.value.deny) f["files " + e.path + " deny"] = rights_to_string(e.value.deny);
    }
    const auto& n = b.network;
    f["network mode"] = n.mode == NetMode::None ? "none" : n.mode == NetMode::Loopback ? "loopback" : "rules";
    f["network families"] = family_names(n.af_allow);
    for (const auto& r : n.rules) f["network " + format_net_rule(r)] = "present";
    for (const auto& u : n.unix_rules) {
        if (u.op_mask & BW_NET_CONNECT) f["network unix connect " + u.address] = "present";
        if (u.op_mask & BW_NET_SEND) f["network unix send " + u.address] = "present";
    }
    const auto& s = b.syscalls;
    f["syscalls baseline"] = s.baseline;
    f["syscalls on_violation"] = action_name(s.violation, s.violation_errno);
    // What the filter accepts, not how it was written: no list and
    // [native] are the same policy.
    std::string arches = "native";
    for (const auto& [name, _] : s.architectures)
        if (name != "native") arches += ", " + name;
    f["syscalls architectures"] = arches;
    for (const auto& [name, _] : s.allow) f["syscalls allow " + name] = "present";
    for (const auto& [name, _] : s.deny) f["syscalls deny " + name] = "present";
    const auto& L = b.limits;
    auto lim = [&](const char* k, const std::optional<uint64_t>& v, std::string (*fmt)(uint64_t)) {
        f[std::string("limits ") + k] = v ? fmt(*v) : "none";
    };
    auto num = [](uint64_t v) { return std::to_string(v); };
    lim("memory", L.memory_bytes, format_size);
    lim("pids", L.pids, +num);
    f["limits cpu"] = L.cpu_percent ? std::to_string(*L.cpu_percent) + "%" : "none";
    lim("timeout", L.timeout_ms, format_duration);
    lim("output", L.output_bytes, format_size);
    lim("file_size", L.file_size_bytes, format_size);
    lim("open_files", L.open_files, +num);
    const auto& h = b.hardening;
    f["hardening mte"] = h.mte == MteMode::Off ? "off" : h.mte == MteMode::Async ? "async" : "sync";
    for (const auto& [p, r] : h.properties) f["hardening " + p] = r == Requirement::Require ? "require" : "warn";
    f["hardening store_bypass"] = h.disable_store_bypass ? "disable" : "default";
    f["hardening indirect_branch"] = h.disable_indirect_branch ? "disable" : "default";
    f["environment clear"] = b.env.clear_all ? "true" : "false";
    for (const auto& p : b.env.pass) f["environment pass " + p] = "present";
    for (const auto& [k, v] : b.env.set) f["environment set " + k] = v;
    return f;
}

std::function<int()> setup_diff(CLI::App& sub, CommonOptions& common) {
    auto a = std::make_shared<std::string>();
    auto b = std::make_shared<std::string>();
    sub.add_option("a", *a, "old policy (rule file or bundle .json)")->required();
    sub.add_option("b", *b, "new policy (rule file or bundle .json)")->required();
    return [a, b, &common] {
        auto pa = load_policy(*a, common, std::cerr);
        if (!pa) return 2;
        auto pb = load_policy(*b, common, std::cerr);
        if (!pb) return 2;
        auto fa = facts(*pa), fb = facts(*pb);
        auto out = nlohmann::json::array();
        std::string text;
        for (const auto& [k, v] : fa) {
            auto it = fb.find(k);
            if (it == fb.end()) {
                out.push_back({{"change", "removed"}, {"what", k}, {"from", v}});
                text += "- " + k + (v == "present" ? "" : ": " + v) + "\n";
            } else if (it->second != v) {
                out.push_back({{"change", "changed"}, {"what", k}, {"from", v}, {"to", it->second}});
                text += "~ " + k + ": " + v + " -> " + it->second + "\n";
            }
        }
        for (const auto& [k, v] : fb) {
            if (fa.contains(k)) continue;
            out.push_back({{"change", "added"}, {"what", k}, {"to", v}});
            text += "+ " + k + (v == "present" ? "" : ": " + v) + "\n";
        }
        if (common.json) std::cout << out.dump(2) << "\n";
        else std::cout << (text.empty() ? "no semantic differences\n" : text);
        return out.empty() ? 0 : 1;
    };
}

const bool diff_registered = register_command({"diff", "semantic differences between two policies", setup_diff});

}  // namespace
}  // namespace bulwark::policyc
