// compile_file / compile_string: parse, run the pass pipeline, hand back the
// bundle (only when there is no error) and every diagnostic.
#include <algorithm>
#include <filesystem>

#include "passes.h"

namespace bulwark::policy {

bool CompileContext::check_choice(const ast::Scalar& s, const std::vector<std::string>& choices,
                                  const std::string& what) {
    if (std::find(choices.begin(), choices.end(), s.value) != choices.end()) return true;
    std::vector<std::string> hints;
    if (auto m = closest_match(s.value, choices); !m.empty()) hints.push_back("did you mean \"" + m + "\"?");
    std::string list;
    for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
    hints.push_back(what + " is one of: " + list);
    error(s.span, "bad-value", "unknown " + what + " \"" + s.value + "\"", std::move(hints));
    return false;
}

ast::Span CompileContext::span_of(uint32_t rule_id) const {
    const RuleRef* r = bundle.rule(rule_id);
    if (!r) return {};
    ast::Span span{r->loc, 1};
    auto src = sources.find(r->loc.file);
    if (src == sources.end() || r->loc.line == 0) return span;
    auto& starts = line_starts_[r->loc.file];
    if (starts.empty()) {
        starts.push_back(0);
        for (size_t i = 0; i < src->second.size(); ++i)
            if (src->second[i] == '\n') starts.push_back(i + 1);
    }
    if (r->loc.line > starts.size()) return span;
    span.length = source_token_length(src->second, starts[r->loc.line - 1] + r->loc.col - 1);
    return span;
}

bool begin_compile_string(CompileContext& ctx, std::string_view text, std::string file_name) {
    ctx.main_file = std::move(file_name);
    auto& source = ctx.sources[ctx.main_file] = std::string(text);
    ctx.bundle.rules.push_back(RuleRef{0, SourceLoc{ctx.main_file, 0, 0}, "(defaults)", "policy"});
    return parse_rule_file(source, ctx.main_file, ctx.opts.limits, ctx.bundle.rules, ctx.diags, ctx.ast);
}

bool begin_compile_file(CompileContext& ctx, const std::string& path) {
    auto text = read_text_file(path, ctx.opts.limits.max_file_bytes);
    if (!text) {
        ctx.main_file = path;
        ctx.diags.push_back(Diagnostic{Severity::Error, SourceLoc{path, 0, 0}, 1, text.error(), {}, "unreadable"});
        return false;
    }
    std::string dir = std::filesystem::path(path).parent_path().string();
    ctx.main_dir = dir.empty() ? "." : dir;
    if (ctx.opts.inputs) ctx.opts.inputs->note(Look::Content, path, *text);
    return begin_compile_string(ctx, *text, path);
}

namespace {

CompileResult compile(CompileContext& ctx, bool begun) {
    if (begun) run_pipeline(ctx);
    CompileResult r;
    r.diagnostics = std::move(ctx.diags);
    r.sources = std::move(ctx.sources);
    if (ctx.seccomp_ready) r.seccomp = std::move(ctx.seccomp);
    if (count_errors(r.diagnostics) == 0) r.bundle = std::move(ctx.bundle);
    return r;
}

}  // namespace

CompileResult compile_string(std::string_view text, std::string file_name, const CompileOptions& opts) {
    CompileContext ctx(opts);
    bool begun = begin_compile_string(ctx, text, std::move(file_name));
    return compile(ctx, begun);
}

CompileResult compile_file(const std::string& path, const CompileOptions& opts) {
    CompileContext ctx(opts);
    bool begun = begin_compile_file(ctx, path);
    return compile(ctx, begun);
}

std::vector<Diagnostic> check_syntax(std::string_view text, const std::string& file_name,
                                     const InputLimits& limits) {
    std::vector<RuleRef> rules(1);
    std::vector<Diagnostic> diags;
    ast::RuleFile out;
    parse_rule_file(text, file_name, limits, rules, diags, out);
    return diags;
}

std::string render_diagnostics(const CompileResult& result) {
    return render_diagnostics(result.diagnostics, result.sources);
}

}  // namespace bulwark::policy
