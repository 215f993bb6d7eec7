#include "common.h"

#include <fstream>
#include <iostream>
#include <sstream>

#include "bulwark/policy/values.h"

namespace bulwark::policyc {

using namespace bulwark::policy;

CompileOptions compile_options(const CommonOptions& common) {
    CompileOptions o;
    o.rules_dirs = common.rules_dirs;
    return o;
}

std::expected<Bundle, int> load_policy(const std::string& path, const CommonOptions& common, std::ostream& err) {
    if (path.ends_with(".json")) {
        std::ifstream in(path);
        if (!in) {
            err << path << ": cannot open\n";
            return std::unexpected(2);
        }
        auto j = nlohmann::json::parse(in, nullptr, false);
        if (j.is_discarded()) {
            err << path << ": not valid JSON\n";
            return std::unexpected(2);
        }
        auto b = bundle_from_json(j);
        if (!b) {
            err << path << ": " << b.error() << "\n";
            return std::unexpected(2);
        }
        return *b;
    }
    auto r = compile_file(path, compile_options(common));
    if (!r.ok()) {
        err << render_diagnostics(r);
        return std::unexpected(1);
    }
    return *r.bundle;
}

}  // namespace bulwark::policyc
