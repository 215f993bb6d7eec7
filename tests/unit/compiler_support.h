#pragma once
// Helpers for the compiler's unit tests: compile with a recording seccomp
// backend (the real emitter is tested on its own), and find diagnostics.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "bulwark/policy/compiler.h"
#include "bulwark/policy/coverage.h"

namespace bulwark::test {

using namespace bulwark::policy;

// A rules directory of the test's own, removed afterwards.
struct RulesDir {
    std::filesystem::path path;
    RulesDir() {
        char tmpl[] = "/tmp/bulwark-rules-XXXXXX";
        REQUIRE(::mkdtemp(tmpl));
        path = tmpl;
    }
    ~RulesDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    RulesDir(const RulesDir&) = delete;
    RulesDir& operator=(const RulesDir&) = delete;
    // `text` written at `rel` below it (directories made); its path.
    std::string write(const std::string& rel, const std::string& text) const {
        auto p = path / rel;
        std::filesystem::create_directories(p.parent_path());
        std::ofstream(p) << text;
        return p.string();
    }
};

inline CompileOptions options(std::vector<std::string> dirs = {}) {
    CompileOptions o;
    o.rules_dirs = std::move(dirs);
    o.seccomp_compiler = [](const SeccompSpec& spec) -> std::expected<SeccompPlan, SeccompError> {
        SeccompPlan p;
        p.program.push_back(sock_filter{0x06, 0, 0, 0x7fff0000});  // ret ALLOW
        p.baseline = spec.baseline == SeccompSpec::Baseline::None ? "none" : "default";
        for (const auto& r : spec.allow) p.syscall_rules.emplace_back(r.name, r.rule_id);
        for (const auto& r : spec.deny) p.syscall_rules.emplace_back(r.name, r.rule_id);
        return p;
    };
    return o;
}

inline CompileResult compile(std::string_view text, std::vector<std::string> dirs = {}) {
    return compile_string(text, "test.yaml", options(std::move(dirs)));
}

inline const Diagnostic* find_diag(const CompileResult& r, std::string_view code) {
    for (const auto& d : r.diagnostics)
        if (d.code == code) return &d;
    return nullptr;
}

// The coverage row of the first rule of `kind`, or nullptr.
inline const RuleCoverage* coverage_row(const std::vector<RuleCoverage>& cov, std::string_view kind) {
    for (const auto& c : cov)
        if (c.kind == kind) return &c;
    return nullptr;
}

inline bool has_code(const CompileResult& r, std::string_view code) { return find_diag(r, code) != nullptr; }

inline size_t count_code(const CompileResult& r, std::string_view code) {
    return size_t(std::count_if(r.diagnostics.begin(), r.diagnostics.end(),
                                [&](const Diagnostic& d) { return d.code == code; }));
}

// A compile that must fail with `code` and must not hand out a bundle.
inline void require_error(std::string_view text, std::string_view code) {
    auto r = compile(text);
    INFO(render_diagnostics(r));
    CHECK_FALSE(r.ok());
    CHECK_FALSE(r.bundle.has_value());
    const Diagnostic* d = find_diag(r, code);
    REQUIRE(d != nullptr);
    CHECK(d->severity == Severity::Error);
}

// A compile that must fail with `code` at line:col, its message saying `says`.
inline void require_error_at(std::string_view text, std::string_view code, uint32_t line, uint32_t col,
                             std::string_view says) {
    auto r = compile(text);
    INFO(render_diagnostics(r));
    const Diagnostic* d = find_diag(r, code);
    REQUIRE(d);
    CHECK(d->loc.line == line);
    CHECK(d->loc.col == col);
    CHECK_THAT(d->message, Catch::Contains(std::string(says)));
}

inline Bundle require_ok(std::string_view text, std::vector<std::string> dirs = {}) {
    auto r = compile(text, std::move(dirs));
    INFO(render_diagnostics(r));
    REQUIRE(r.ok());
    return *r.bundle;
}

}  // namespace bulwark::test
