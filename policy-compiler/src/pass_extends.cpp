// extends: resolve base rule files (rules dirs, cycle detection, depth bound)
// and merge them, base first: lists append, scalars override, a base's deny
// entries always stay.
#include <algorithm>
#include <filesystem>
#include <set>

#include "passes.h"

namespace bulwark::policy {
namespace {

// A keyed-scalar section of an extension over its base's: each key the
// extension writes replaces the base's, except the `kept` keys, where the
// base's value stays when `strength` ranks it above the extension's.
template <class Strength>
void merge_keyed(std::vector<std::pair<std::string, ast::Scalar>>& dst,
                 std::vector<std::pair<std::string, ast::Scalar>>& src, std::initializer_list<std::string_view> kept,
                 Strength strength) {
    for (auto& [name, value] : src) {
        auto it = std::find_if(dst.begin(), dst.end(), [&](const auto& kv) { return kv.first == name; });
        const bool ranked = std::find(kept.begin(), kept.end(), name) != kept.end();
        if (it != dst.end() && ranked && strength(it->second.value) > strength(value.value)) continue;
        if (it != dst.end()) dst.erase(it);
        dst.emplace_back(name, std::move(value));
    }
}

bool valid_rule_name(std::string_view n) {
    if (n.empty() || n.size() > 255) return false;
    size_t start = 0;
    while (start <= n.size()) {
        size_t slash = n.find('/', start);
        if (slash == std::string_view::npos) slash = n.size();
        std::string_view part = n.substr(start, slash - start);
        if (part.empty() || part == "." || part == "..") return false;
        char first = part.front();
        if (!((first >= 'a' && first <= 'z') || (first >= '0' && first <= '9'))) return false;
        for (char c : part)
            if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '+' || c == '-'))
                return false;
        start = slash + 1;
    }
    return true;
}

template <class T>
void append(std::vector<T>& dst, std::vector<T>& src) {
    for (auto& x : src) dst.push_back(std::move(x));
}

void merge_into(ast::RuleFile& dst, ast::RuleFile& src) {
    if (src.tool) dst.tool = src.tool;
    if (src.description) dst.description = src.description;
    if (src.mode) dst.mode = src.mode;
    append(dst.mandatory, src.mandatory);
    append(dst.binaries, src.binaries);

    if (src.files.present) {
        if (!dst.files.present) dst.files.span = src.files.span;
        dst.files.present = true;
        append(dst.files.read, src.files.read);
        append(dst.files.write, src.files.write);
        append(dst.files.create, src.files.create);
        append(dst.files.remove, src.files.remove);
        append(dst.files.exec, src.files.exec);
        append(dst.files.deny, src.files.deny);
    }
    if (src.exec.present) {
        if (!dst.exec.present) dst.exec.span = src.exec.span;
        dst.exec.present = true;
        append(dst.exec.allow, src.exec.allow);
    }
    auto& dn = dst.network;
    auto& sn = src.network;
    if (sn.present) {
        dn.present = true;
        dn.span = sn.span;
        if (sn.mapping) {
            dn.mapping = true;
            dn.mode.reset();
            dn.rule_id = sn.rule_id;
        } else {
            dn.mapping = false;
            dn.mode = sn.mode;
            dn.rule_id = sn.rule_id;
        }
        append(dn.families, sn.families);
        append(dn.netlink, sn.netlink);
        append(dn.connect, sn.connect);
        append(dn.bind, sn.bind);
        append(dn.send, sn.send);
        append(dn.deny, sn.deny);
        append(dn.dns, sn.dns);
        append(dn.unix_connect, sn.unix_connect);
        append(dn.unix_send, sn.unix_send);
        append(dn.unix_bind, sn.unix_bind);
    }
    auto& ds = dst.syscalls;
    auto& ss = src.syscalls;
    if (ss.present) {
        if (!ds.present) ds.span = ss.span;
        ds.present = true;
        if (ss.baseline || ss.import) {
            ds.baseline = ss.baseline;
            ds.import = ss.import;
        }
        append(ds.allow, ss.allow);
        append(ds.deny, ss.deny);
        if (ss.on_violation) ds.on_violation = ss.on_violation;
        if (ss.has_architectures) {
            // A union, like every list: a child may accept one more ABI, and
            // what a base accepts stays accepted.
            if (!ds.has_architectures) ds.architectures_span = ss.architectures_span;
            ds.has_architectures = true;
            append(ds.architectures, ss.architectures);
        }
    }
    for (auto& [name, value] : src.limits) {
        std::erase_if(dst.limits, [&](const auto& kv) { return kv.first == name; });
        dst.limits.emplace_back(name, std::move(value));
    }
    // microvm: memory and vcpus are replaced; mode and confidential keep the
    // stricter of base and extension (like a base's denies, an extension
    // cannot take a tool out of its VM).
    merge_keyed(dst.microvm, src.microvm, {"mode", "confidential"},
                [](const std::string& v) { return v == "required" ? 2 : v == "preferred" ? 1 : 0; });
    // profile: learn is replaced; respond keeps the stronger response (an
    // extension cannot turn a stop into a record): record < narrow (the tool
    // runs on, within its profile) < require-grant (it does not run) < stop.
    merge_keyed(dst.profile, src.profile, {"respond"}, [](const std::string& v) {
        return v == "stop" ? 3 : v == "require-grant" ? 2 : v == "narrow" ? 1 : 0;
    });
    auto& dh = dst.hardening;
    auto& sh = src.hardening;
    if (sh.present) {
        dh.present = true;
        dh.rule_id = sh.rule_id;
        if (sh.mte) dh.mte = sh.mte;
        append(dh.require, sh.require);
        append(dh.warn, sh.warn);
        if (sh.store_bypass) dh.store_bypass = sh.store_bypass;
        if (sh.indirect_branch) dh.indirect_branch = sh.indirect_branch;
    }
    auto& de = dst.environment;
    auto& se = src.environment;
    if (se.present) {
        de.present = true;
        append(de.pass, se.pass);
        for (auto& [name, value] : se.set) {
            std::erase_if(de.set, [&](const auto& kv) { return kv.first.value == name.value; });
            de.set.emplace_back(std::move(name), std::move(value));
        }
        if (se.clear) de.clear = se.clear;
    }
}

struct Resolver {
    CompileContext& ctx;
    std::vector<std::string> dirs;
    std::vector<std::string> stack;       // names being resolved (cycle detection)
    std::set<std::string> done;
    std::vector<std::string> chain;       // base first
    std::vector<ast::RuleFile> bases;

    void visit(const std::vector<ast::Scalar>& names, uint32_t depth) {
        for (const auto& n : names) {
            if (ctx.failed()) return;
            if (!valid_rule_name(n.value)) {
                ctx.error(n.span, "bad-extends", "invalid rule name \"" + n.value + "\" in extends",
                          {"names are relative to a rules directory, e.g. base/network-client"});
                continue;
            }
            if (std::find(stack.begin(), stack.end(), n.value) != stack.end()) {
                std::string cycle;
                for (const auto& s : stack) cycle += s + " -> ";
                ctx.error(n.span, "extends-cycle", "extends cycle: " + cycle + n.value);
                return;
            }
            if (done.contains(n.value)) continue;
            if (depth > ctx.opts.limits.max_extends_depth) {
                ctx.error(n.span, "extends-too-deep",
                          "extends chain deeper than " + std::to_string(ctx.opts.limits.max_extends_depth) + " levels");
                return;
            }
            std::string found;
            for (const auto& d : dirs) {
                std::string cand = (d.empty() ? std::string(".") : d) + "/" + n.value + ".yaml";
                if (look_via(ctx.opts.inputs, Look::Type, cand) == "regular") {
                    found = cand;
                    break;
                }
            }
            if (found.empty()) {
                std::string where;
                for (const auto& d : dirs) where += (where.empty() ? "" : ", ") + d;
                ctx.error(n.span, "extends-not-found", "no rule file \"" + n.value + ".yaml\" in " +
                                                           (where.empty() ? std::string("any rules directory") : where),
                          {"pass --rules-dir DIR to search another directory"});
                continue;
            }
            auto text = read_text_file(found, ctx.opts.limits.max_file_bytes);
            if (!text) {
                ctx.error(n.span, "extends-unreadable", text.error());
                continue;
            }
            ctx.sources[found] = *text;
            if (ctx.opts.inputs) ctx.opts.inputs->note(Look::Content, found, *text);
            ast::RuleFile base;
            if (!parse_rule_file(*text, found, ctx.opts.limits, ctx.bundle.rules, ctx.diags, base)) return;
            stack.push_back(n.value);
            visit(base.extends, depth + 1);
            stack.pop_back();
            done.insert(n.value);
            chain.push_back(n.value);
            bases.push_back(std::move(base));
        }
    }
};

void run_resolve_extends(CompileContext& ctx) {
    if (ctx.ast.extends.empty()) return;
    Resolver r{ctx, ctx.opts.rules_dirs, {}, {}, {}, {}};
    if (r.dirs.empty() && !ctx.main_dir.empty()) r.dirs.push_back(ctx.main_dir);
    r.stack.push_back("(" + ctx.main_file + ")");
    r.visit(ctx.ast.extends, 1);
    if (ctx.failed()) return;
    ast::RuleFile merged;
    merged.file = ctx.ast.file;
    for (auto& b : r.bases) merge_into(merged, b);
    merge_into(merged, ctx.ast);
    merged.tool = ctx.ast.tool;   // a base's tool name never names the child
    merged.extends = ctx.ast.extends;
    // The tool's own file decides for the rules it extends too.
    merged.unenforceable = ctx.ast.unenforceable;
    merged.network.unix_unenforceable = ctx.ast.network.unix_unenforceable;
    if (merged.unenforceable)
        for (auto& rule : ctx.bundle.rules) rule.unenforceable_run = true;
    ctx.ast = std::move(merged);
    ctx.bundle.extends = std::move(r.chain);
}

}  // namespace

Pass resolve_extends_pass() { return {"resolve-extends", run_resolve_extends, true}; }

}  // namespace bulwark::policy
