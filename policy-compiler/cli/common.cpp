#include "common.h"

#include <algorithm>
#include <filesystem>
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

namespace {

namespace fs = std::filesystem;

bool is_policy_test(const std::string& name) { return name.ends_with(".test.yaml") || name.ends_with(".test.yml"); }

// Why a .json file is not a rule file ("" when it is one). A file that is not
// valid JSON counts as a rule file: its check then says what is wrong with it.
std::string json_not_rule_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    auto j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded()) return "";
    if (!j.is_object()) return "not a rule file (not a JSON object)";
    if (j.contains("format") && j.contains("hash")) return "a compiled bundle, not a rule file";
    if (!j.contains("tool")) return "not a rule file (no \"tool\" key; e.g. a seccomp profile to import)";
    return "";
}

std::string plural(size_t n, const std::string& what) {
    return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

void expand_dir(const std::string& arg, FileKind kind, RuleFiles& out) {
    std::vector<std::string> found;
    size_t tests = 0, rule_files = 0, other = 0;
    std::vector<std::string> skipped;  // named: each is a file a reader may have meant
    std::error_code ec;
    fs::recursive_directory_iterator it(arg, ec), end;
    if (ec) {
        out.errors.push_back(arg + ": cannot read the directory: " + ec.message());
        return;
    }
    for (; it != end; it.increment(ec)) {
        if (ec) break;
        const fs::path& p = it->path();
        std::string name = p.filename().string();
        if (name.starts_with(".")) {  // .git, editor files
            std::error_code dec;
            if (it->is_directory(dec)) it.disable_recursion_pending();
            continue;
        }
        std::error_code sec;
        if (it->is_symlink(sec) && it->is_directory(sec)) {
            skipped.push_back(p.string() + ": skipped: a symbolic link to a directory (name it to check it)");
            continue;
        }
        if (it->is_directory(sec)) continue;  // walked into
        bool yaml = name.ends_with(".yaml") || name.ends_with(".yml");
        if (!it->is_regular_file(sec)) {
            // A dangling link or a FIFO named like a rule file is checked, so
            // reading it says what it is; anything else is not ours.
            bool ours = kind == FileKind::PolicyTests ? is_policy_test(name)
                                                      : (yaml && !is_policy_test(name)) || name.ends_with(".json");
            if (ours) found.push_back(p.string());
            else ++other;
            continue;
        }
        if (kind == FileKind::PolicyTests) {
            if (is_policy_test(name)) found.push_back(p.string());
            else if (yaml) ++rule_files;
            else ++other;
            continue;
        }
        if (yaml && is_policy_test(name)) {
            ++tests;
        } else if (yaml) {
            found.push_back(p.string());
        } else if (name.ends_with(".json")) {
            if (std::string why = json_not_rule_file(p); why.empty())
                found.push_back(p.string());
            else
                skipped.push_back(p.string() + ": skipped: " + why);
        } else {
            ++other;
        }
    }
    if (ec) {
        out.errors.push_back(arg + ": cannot read the directory: " + ec.message());
        return;
    }
    std::sort(found.begin(), found.end());
    std::sort(skipped.begin(), skipped.end());
    for (auto& s : skipped) out.notes.push_back(std::move(s));
    if (found.empty()) {
        out.errors.push_back(arg + ": no " +
                             std::string(kind == FileKind::RuleFiles ? "rule files (*.yaml, *.yml, *.json)"
                                                                     : "policy test files (*.test.yaml)") +
                             " below this directory");
        return;
    }
    std::string note = arg + ": " + plural(found.size(), kind == FileKind::RuleFiles ? "rule file" : "policy test file");
    if (kind == FileKind::RuleFiles && tests)
        note += "; " + plural(tests, "policy test") + " not checked here (`policyc test` runs them)";
    if (kind == FileKind::PolicyTests && rule_files) note += "; " + plural(rule_files, "rule file") + " not run";
    if (other) note += "; " + plural(other, "other file") + " ignored";
    out.notes.push_back(std::move(note));
    // extends names resolve in the directory (without a trailing slash, so
    // the paths in diagnostics read "rules/base/x.yaml").
    std::string root = arg;
    while (root.size() > 1 && root.back() == '/') root.pop_back();
    for (auto& f : found) out.files.push_back({std::move(f), root});
}

}  // namespace

RuleFiles expand_rule_paths(const std::vector<std::string>& paths, FileKind kind) {
    RuleFiles out;
    for (const auto& arg : paths) {
        std::error_code ec;
        if (fs::is_directory(arg, ec))
            expand_dir(arg, kind, out);
        else
            out.files.push_back({arg, ""});  // reading it says what it is, if not a file
    }
    return out;
}

}  // namespace bulwark::policyc
