// policyc explain FILE: what the policy allows, section by section, which
// layers enforce each section, and what Landlock cannot express.
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "bulwark/policy/coverage.h"
#include "bulwark/policy/explain.h"
#include "common.h"

namespace bulwark::policyc {
namespace {

using namespace bulwark::policy;

std::function<int()> setup_explain(CLI::App& sub, CommonOptions& common) {
    auto file = std::make_shared<std::string>();
    sub.add_option("file", *file, "rule file, or a compiled bundle (.json)")->required();
    auto layers = std::make_shared<std::vector<std::string>>();
    auto opt = sub.add_option("--layers", *layers,
                              "layers in force on the target host (comma-separated: bpf_lsm, landlock, mount, seccomp, "
                              "sock_addr, netns, cgroup, rlimit, supervisor); `agentd coverage` lists this host's")
                   ->delimiter(',');
    return [file, layers, opt, &common] {
        auto b = load_policy(*file, common, std::cerr);
        if (!b) return b.error();
        for (const auto& l : *layers)
            if (std::find(coverage_layers().begin(), coverage_layers().end(), l) == coverage_layers().end()) {
                std::cerr << "policyc explain: --layers: unknown layer \"" << l << "\"\n";
                return 2;
            }
        const std::vector<std::string>* in_force = opt->count() ? layers.get() : nullptr;
        if (in_force && !common.json) {
            std::cout << coverage_text(*b, in_force);
            size_t unheld = 0;
            for (const auto& c : rule_coverage(*b)) {
                bool held = false;
                for (const auto& l : c.layers)
                    held |= std::find(in_force->begin(), in_force->end(), l.layer) != in_force->end();
                unheld += !held && !c.unenforceable_run;
            }
            return unheld ? 1 : 0;
        }
        if (common.json) {
            nlohmann::json section_layers = {{"files", {"bpf-lsm", "landlock"}},
                                     {"exec", {"bpf-lsm", "landlock"}},
                                     {"network", {"namespaces", "sock-addr", "landlock"}},
                                     {"syscalls", {"seccomp"}},
                                     {"limits", {"cgroup"}},
                                     {"hardening", {"supervisor"}},
                                     {"environment", {"supervisor"}}};
            nlohmann::json cov = nlohmann::json::array();
            for (const auto& c : rule_coverage(*b)) {
                nlohmann::json ls = nlohmann::json::array();
                for (const auto& l : c.layers) ls.push_back({{"layer", l.layer}, {"how", l.how}});
                nlohmann::json row = {{"rule", rule_where(*b, c.rule_id)},
                                      {"text", b->rule(c.rule_id) ? b->rule(c.rule_id)->text : ""},
                                      {"kind", c.kind},
                                      {"layers", std::move(ls)}};
                if (c.unenforceable_run) row["unenforceable"] = "run";
                if (in_force) {
                    nlohmann::json here = nlohmann::json::array();
                    for (const auto& l : c.layers)
                        if (std::find(in_force->begin(), in_force->end(), l.layer) != in_force->end())
                            here.push_back(l.layer);
                    row["held_here_by"] = std::move(here);
                }
                cov.push_back(std::move(row));
            }
            std::cout << nlohmann::json{{"bundle", bundle_to_json(*b)}, {"layers", section_layers},
                                        {"landlock_gaps", b->landlock.gaps}, {"coverage", std::move(cov)}}
                             .dump(2)
                      << "\n";
            return 0;
        }
        std::cout << explain_text(*b);
        return 0;
    };
}

const bool explain_registered = register_command({"explain", "explain a policy: what it allows and which layers enforce it", setup_explain});

}  // namespace
}  // namespace bulwark::policyc
