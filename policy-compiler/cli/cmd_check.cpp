// policyc check PATHS...: diagnostics for each rule file; exit 1 on any error.
// A directory is every rule file below it (common.h: expand_rule_paths), with
// extends resolved in that directory unless --rules-dir says otherwise.
#include <iostream>

#include "common.h"

namespace bulwark::policyc {
namespace {

std::function<int()> setup_check(CLI::App& sub, CommonOptions& common) {
    auto files = std::make_shared<std::vector<std::string>>();
    auto werror = std::make_shared<bool>(false);
    sub.add_option("paths", *files, "rule files, or directories: every rule file below them")->required();
    sub.add_flag("--werror", *werror, "treat warnings as errors");
    return [files, werror, &common] {
        int rc = 0;
        auto out = nlohmann::json::array();
        RuleFiles expanded = expand_rule_paths(*files, FileKind::RuleFiles);
        for (const auto& [f, found_below] : expanded.files) {
            auto opts = compile_options(common);
            if (opts.rules_dirs.empty() && !found_below.empty()) opts.rules_dirs = {found_below};
            opts.warnings_as_errors = *werror;
            auto r = compile_file(f, opts);
            if (!r.ok()) rc = 1;
            if (common.json) {
                out.push_back({{"file", f}, {"ok", r.ok()}, {"hash", r.ok() ? r.bundle->hash : ""},
                               {"diagnostics", policy::diagnostics_to_json(r.diagnostics)}});
                continue;
            }
            std::cerr << render_diagnostics(r);
            size_t errors = policy::count_errors(r.diagnostics);
            size_t warnings = 0;
            for (const auto& d : r.diagnostics) warnings += d.severity == policy::Severity::Warning;
            std::cout << f << ": " << (r.ok() ? "ok" : std::to_string(errors) + " error(s)");
            if (warnings) std::cout << ", " << warnings << " warning(s)";
            std::cout << "\n";
        }
        if (common.json) std::cout << out.dump(2) << "\n";
        for (const auto& n : expanded.notes) (common.json ? std::cerr : std::cout) << n << "\n";
        for (const auto& e : expanded.errors) std::cerr << "policyc check: " << e << "\n";
        if (!expanded.errors.empty()) rc = 1;
        return rc;
    };
}

const bool check_registered = register_command({"check", "check rule files and print diagnostics", setup_check});

}  // namespace
}  // namespace bulwark::policyc
