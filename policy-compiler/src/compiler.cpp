// compile_file / compile_string: parse, run the pass pipeline, hand back the
// bundle (only when there is no error) and every diagnostic.
#include <filesystem>

#include "passes.h"

namespace bulwark::policy {
namespace {

CompileResult compile(CompileContext& ctx, std::string_view text) {
    ctx.bundle.rules.push_back(RuleRef{0, SourceLoc{ctx.main_file, 0, 0}, "(defaults)", "policy"});
    if (parse_rule_file(text, ctx.main_file, ctx.opts.limits, ctx.bundle.rules, ctx.diags, ctx.ast))
        run_pipeline(ctx);
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
    ctx.main_file = std::move(file_name);
    ctx.sources[ctx.main_file] = std::string(text);
    return compile(ctx, text);
}

CompileResult compile_file(const std::string& path, const CompileOptions& opts) {
    CompileContext ctx(opts);
    ctx.main_file = path;
    auto text = read_text_file(path, opts.limits.max_file_bytes);
    if (!text) {
        CompileResult r;
        r.diagnostics.push_back(
            Diagnostic{Severity::Error, SourceLoc{path, 0, 0}, 1, text.error(), {}, "unreadable"});
        return r;
    }
    std::string dir = std::filesystem::path(path).parent_path().string();
    ctx.main_dir = dir.empty() ? "." : dir;
    ctx.sources[path] = *text;
    return compile(ctx, *text);
}

std::string render_diagnostics(const CompileResult& result) {
    return render_diagnostics(result.diagnostics, result.sources);
}

}  // namespace bulwark::policy
