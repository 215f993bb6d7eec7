#pragma once
// State shared by the parser and every pass of one compile.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bulwark/policy/ast.h"
#include "bulwark/policy/compiler.h"
#include "bulwark/policy/values.h"
#include "bulwark/policy/seccomp.h"

namespace bulwark::policy {

struct CompileContext {
    const CompileOptions& opts;
    std::vector<Diagnostic> diags;
    SourceMap sources;
    std::string main_file;
    std::string main_dir;          // directory of the main rule file ("" for strings)
    ast::RuleFile ast;             // the main file, then (after extends) the merged tree
    Bundle bundle;                 // filled by the passes and emitters
    SeccompSpec seccomp;
    bool seccomp_ready = false;

    explicit CompileContext(const CompileOptions& o) : opts(o) {}

    bool failed() const { return count_errors(diags) > 0; }

    Diagnostic& report(Severity sev, const ast::Span& span, std::string code, std::string message,
                       std::vector<std::string> hints = {}) {
        diags.push_back(Diagnostic{sev, span.loc, span.length, std::move(message), std::move(hints),
                                   std::move(code)});
        return diags.back();
    }
    Diagnostic& error(const ast::Span& span, std::string code, std::string message,
                      std::vector<std::string> hints = {}) {
        return report(Severity::Error, span, std::move(code), std::move(message), std::move(hints));
    }
    Diagnostic& warning(const ast::Span& span, std::string code, std::string message,
                        std::vector<std::string> hints = {}) {
        return report(Severity::Warning, span, std::move(code), std::move(message), std::move(hints));
    }
    Diagnostic& note(const ast::Span& span, std::string code, std::string message,
                     std::vector<std::string> hints = {}) {
        return report(Severity::Note, span, std::move(code), std::move(message), std::move(hints));
    }

    // "rules/curl.yaml:12:7"
    std::string where(uint32_t rule_id) const {
        const RuleRef* r = bundle.rule(rule_id);
        if (!r) return "?";
        return r->loc.text();
    }
    // "files.deny ${home}/.ssh (rules/curl.yaml:12:7)"
    std::string describe(uint32_t rule_id) const {
        const RuleRef* r = bundle.rule(rule_id);
        if (!r) return "rule #" + std::to_string(rule_id);
        return r->text + " (" + where(rule_id) + ")";
    }
    // The rule's source span, its length measured in the source text.
    ast::Span span_of(uint32_t rule_id) const;
    // True when `s` is one of `choices`; else an error naming `what`, the
    // closest choice and the list.
    bool check_choice(const ast::Scalar& s, const std::vector<std::string>& choices, const std::string& what);

    mutable std::map<std::string, std::vector<size_t>, std::less<>> line_starts_;
};

// The start of every compile: the main file's text (read from `path`, its
// directory searched for bases when opts.rules_dirs is empty), rule 0 (the
// defaults), and the file parsed into ctx.ast. False, with the diagnostics
// in ctx.diags, when the file cannot be read or does not parse; then no pass
// may run.
bool begin_compile_file(CompileContext& ctx, const std::string& path);
bool begin_compile_string(CompileContext& ctx, std::string_view text, std::string file_name);

// Parses one rule file into `out`, adding its rules to `rules` and its
// problems to `diags`. Returns false when the file has errors.
bool parse_rule_file(std::string_view text, const std::string& file, const InputLimits& limits,
                     std::vector<RuleRef>& rules, std::vector<Diagnostic>& diags, ast::RuleFile& out);

// Length of the YAML token (quoted string, flow collection or plain
// scalar) starting at byte `pos`, for underlining.
uint32_t source_token_length(std::string_view text, size_t pos);

// Reads a file under the size cap; the error is a sentence.
std::expected<std::string, std::string> read_text_file(const std::string& path, size_t max_bytes);

}  // namespace bulwark::policy
