// policyc check FILES...: diagnostics for each rule file; exit 1 on any error.
#include <iostream>

#include "common.h"

namespace bulwark::policyc {
namespace {

std::function<int()> setup(CLI::App& sub, CommonOptions& common) {
    auto files = std::make_shared<std::vector<std::string>>();
    auto werror = std::make_shared<bool>(false);
    sub.add_option("files", *files, "rule files")->required();
    sub.add_flag("--werror", *werror, "treat warnings as errors");
    return [files, werror, &common] {
        int rc = 0;
        auto out = nlohmann::json::array();
        for (const auto& f : *files) {
            auto opts = compile_options(common);
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
        return rc;
    };
}

const bool registered = register_command({"check", "check rule files and print diagnostics", setup});

}  // namespace
}  // namespace bulwark::policyc
