// policyc test: compile each test file's tool from the rules directory,
// instantiate it with the file's vars and hosts, and check every case with the
// reference evaluator. Exit 0 when every case passes, 1 when a case fails,
// 2 when a file or its rules cannot be loaded.
#include "cmd_test.h"

#include <filesystem>
#include <iostream>
#include <memory>

#include "bulwark/policy/compiler.h"
#include "bulwark/policy/policy_test.h"
#include "common.h"

namespace bulwark::cli {

namespace {

namespace fs = std::filesystem;
using policy::Bundle;

struct TestOptions {
    std::string rules_dir;
    std::vector<std::string> files;
    bool json = false;
};

// The compiled bundle for <rules-dir>/<tool>.yaml; `extends:` names resolve
// against the rules directory.
std::expected<Bundle, std::string> compile_tool(const fs::path& rule_file, const fs::path& rules_dir) {
    if (!fs::exists(rule_file)) return std::unexpected("no rule file " + rule_file.string() + " for this tool");
    policy::CompileOptions opts;
    opts.rules_dirs = {rules_dir.string()};
    auto result = policy::compile_file(rule_file.string(), opts);
    if (!result.ok()) return std::unexpected("cannot compile " + rule_file.string() + ":\n" +
                                             policy::render_diagnostics(result));
    return std::move(*result.bundle);
}

fs::path rules_dir_for(const TestOptions& o, const fs::path& test_file) {
    if (!o.rules_dir.empty()) return o.rules_dir;
    // rules/tests/<tool>.test.yaml -> rules/
    return test_file.parent_path().parent_path();
}

int run(const TestOptions& o) {
    int status = 0;
    size_t passed = 0, failed = 0;
    // A directory stands for every policy test file below it.
    auto expanded = policyc::expand_rule_paths(o.files, policyc::FileKind::PolicyTests);
    for (const auto& e : expanded.errors) std::cerr << "policyc test: " << e << "\n";
    if (!expanded.errors.empty()) status = 2;
    for (const auto& [name, found_below] : expanded.files) {
        fs::path file = name;
        auto parsed = policy::load_policy_test(file);
        if (!parsed) {
            for (const auto& d : parsed.error()) std::cerr << d.format() << "\n";
            status = 2;
            continue;
        }
        fs::path rules_dir = rules_dir_for(o, file);
        auto bundle = compile_tool(rules_dir / (parsed->tool + ".yaml"), rules_dir);
        if (!bundle) {
            std::cerr << file.string() << ":1:1: ERROR: " << bundle.error() << "\n";
            status = 2;
            continue;
        }
        auto report = policy::run_policy_test(*parsed, *bundle);
        if (o.json)
            std::cout << policy::report_json(report, &*bundle) << "\n";
        else
            std::cout << policy::format_report(report, &*bundle);
        passed += report.passed();
        failed += report.failed();
        if (!report.ok() && status == 0) status = 1;
    }
    for (const auto& n : expanded.notes) (o.json ? std::cerr : std::cout) << n << "\n";
    if (!o.json) std::cout << "total: " << passed << " passed, " << failed << " failed\n";
    return status;
}

}  // namespace

void register_test(CLI::App& app) {
    auto opts = std::make_shared<TestOptions>();
    CLI::App* cmd = app.add_subcommand("test", "run policy test files (rules/tests/<tool>.test.yaml, or a directory of them)");
    cmd->add_option("--rules-dir", opts->rules_dir,
                    "directory holding <tool>.yaml (default: the parent of the test file's directory)");
    cmd->add_option("files", opts->files, "policy test files, or directories: every *.test.yaml below them")
        ->required()
        ->check(CLI::ExistingPath);
    cmd->add_flag("--json", opts->json, "one JSON report per file on stdout");
    cmd->callback([opts] {
        int rc = run(*opts);
        if (rc != 0) throw CLI::RuntimeError(rc);
    });
}

}  // namespace bulwark::cli
