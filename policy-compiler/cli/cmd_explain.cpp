// policyc explain FILE: what the policy allows, section by section, which
// layers enforce each section, and what Landlock cannot express.
#include <iomanip>
#include <iostream>
#include <sstream>

#include "bulwark/policy/explain.h"
#include "common.h"

namespace bulwark::policyc {
namespace {

using namespace bulwark::policy;

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
