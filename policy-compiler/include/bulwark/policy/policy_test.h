#pragma once
// Policy tests: rules/tests/<tool>.test.yaml (format in docs/rule-language.md).
// A test file names a tool, the task variables and DNS answers to
// instantiate its bundle with, and cases: an operation and the expected
// decision. Malformed files are reported as file:line:col diagnostics.
#include <expected>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "bulwark/policy/bundle.h"
#include "bulwark/policy/evaluator.h"
#include "bulwark/policy/instantiate.h"

namespace bulwark::policy {

struct TestDiagnostic {
    SourceLoc loc;
    std::string message;
    // "file:line:col: ERROR: message"
    std::string format() const;
};

struct PolicyTestCase {
    SourceLoc loc;
    std::string text;  // the case as written, one line ("open /etc/x read")
    Operation op;
    Verdict expect = Verdict::Deny;
};

struct PolicyTestFile {
    std::string path;
    std::string tool;
    TaskVars vars;
    std::map<std::string, std::vector<std::string>, std::less<>> hosts;
    std::vector<PolicyTestCase> cases;
};

std::expected<PolicyTestFile, std::vector<TestDiagnostic>> parse_policy_test(std::string_view text,
                                                                             std::string file_name);
std::expected<PolicyTestFile, std::vector<TestDiagnostic>> load_policy_test(
    const std::filesystem::path& path);

struct CaseResult {
    PolicyTestCase test;
    Decision decision;
    bool passed = false;
};

struct PolicyTestReport {
    std::string file;
    std::string tool;
    std::vector<CaseResult> results;
    std::vector<TestDiagnostic> errors;  // file or bundle problems: every case fails
    size_t passed() const;
    size_t failed() const;  // failed cases, or 1 when errors stopped the file
    bool ok() const { return errors.empty() && failed() == 0; }
};

// Instantiates `compiled` with the file's vars and hosts (a host the file
// does not list fails instantiation) and runs every case.
PolicyTestReport run_policy_test(const PolicyTestFile& file, const Bundle& compiled);

// Human-readable report: one line per case ("PASS"/"FAIL", location, case,
// decision, deciding rule), then the explanation for failures.
std::string format_report(const PolicyTestReport& report, const Bundle* bundle);
// Machine-readable report (one JSON object per file).
std::string report_json(const PolicyTestReport& report, const Bundle* bundle);

}  // namespace bulwark::policy
