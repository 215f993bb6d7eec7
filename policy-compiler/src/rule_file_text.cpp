// flatten_rule_file: the parser and the extends pass of a compile, nothing
// after them. rule_file_text: an AST written back in the rule language with
// yaml-cpp's emitter, in the order and the shapes the parser reads.
#include "bulwark/policy/rule_file_text.h"

#include <yaml-cpp/yaml.h>

#include <set>
#include <utility>

#include "passes.h"

namespace bulwark::policy {
namespace {

std::expected<FlatRuleFile, std::vector<Diagnostic>> flatten_begun(CompileContext& ctx, bool begun) {
    if (begun) run_pipeline_through(ctx, resolve_extends_pass().name);
    if (!begun || ctx.failed()) return std::unexpected(std::move(ctx.diags));
    FlatRuleFile flat{std::move(ctx.ast), std::move(ctx.bundle.rules), std::move(ctx.sources)};
    flat.ast.extends.clear();  // merged in: the tree extends nothing more
    return flat;
}

// One rule file's text. Each rule id's comment is written once, after the
// first value that carries the id.
class RuleTextWriter {
public:
    explicit RuleTextWriter(const RuleComments& comments) : comments_(comments) { out_.SetIndent(2); }

    std::string write(const ast::RuleFile& f);

private:
    YAML::Emitter out_;
    const RuleComments& comments_;
    std::set<uint32_t> commented_;

    void comment(uint32_t rule_id) {
        if (rule_id == 0) return;  // rule 0: the defaults, no entry of a file
        auto it = comments_.find(rule_id);
        if (it == comments_.end() || !commented_.insert(rule_id).second) return;
        out_ << YAML::Comment(it->second);
    }

    // A value as the parser reads it back: yaml-cpp quotes what would not
    // read as the same plain scalar; task variables and anything with a
    // colon (IPv6 addresses, a `: ` in a path) are quoted always, so that any
    // YAML reader, in block or flow context, sees one string.
    void value(const std::string& v) {
        if (v.find("${") != std::string::npos || v.find(':') != std::string::npos) out_ << YAML::DoubleQuoted;
        out_ << v;
    }
    void value(const ast::Scalar& s) { value(s.value); }

    void key(std::string_view k) { out_ << YAML::Key << std::string(k) << YAML::Value; }

    // `k: value  # comment`
    void entry(std::string_view k, const ast::Scalar& s) {
        key(k);
        value(s);
        comment(s.rule_id);
    }
    void entry(std::string_view k, const std::optional<ast::Scalar>& s) {
        if (s) entry(k, *s);
    }

    void empty_map() { out_ << YAML::Flow << YAML::BeginMap << YAML::EndMap; }

    // A block list of scalars, each on its own line with its rule's comment.
    void scalars(std::string_view k, const std::vector<ast::Scalar>& list) {
        if (list.empty()) return;
        key(k);
        out_ << YAML::BeginSeq;
        for (const auto& s : list) {
            value(s);
            comment(s.rule_id);
        }
        out_ << YAML::EndSeq;
    }
    // A flow list of values that are one rule's parts (ports, rights).
    void flow_scalars(const std::vector<ast::Scalar>& list) {
        out_ << YAML::Flow << YAML::BeginSeq;
        for (const auto& s : list) value(s);
        out_ << YAML::EndSeq;
    }

    void keyed(std::string_view k, const std::vector<std::pair<std::string, ast::Scalar>>& section) {
        if (section.empty()) return;
        key(k);
        out_ << YAML::BeginMap;
        for (const auto& [name, s] : section) entry(name, s);
        out_ << YAML::EndMap;
    }

    void paths(std::string_view k, const std::vector<ast::PathItem>& list) {
        if (list.empty()) return;
        key(k);
        out_ << YAML::BeginSeq;
        for (const auto& p : list) {
            value(p.path);
            comment(p.rule_id);
        }
        out_ << YAML::EndSeq;
    }

    void binaries(const std::vector<ast::BinaryItem>& list);
    void files(const ast::Files& f);
    void deny_paths(const std::vector<ast::PathItem>& list);
    void network(const ast::Network& n);
    void net_items(std::string_view k, const std::vector<ast::NetItem>& list);
    void syscalls(const ast::Syscalls& s);
    void syscall_items(std::string_view k, const std::vector<ast::SyscallItem>& list);
    void hardening(const ast::Hardening& h);
    void environment(const ast::Environment& e);
};

void RuleTextWriter::binaries(const std::vector<ast::BinaryItem>& list) {
    if (list.empty()) return;
    key("binaries");
    out_ << YAML::BeginSeq;
    for (const auto& b : list) {
        if (!b.sha256 && !b.libraries) {
            value(b.path);
        } else {
            out_ << YAML::Flow << YAML::BeginMap;
            key("path");
            value(b.path);
            if (b.sha256) key("sha256"), value(*b.sha256);
            if (b.libraries) key("libraries"), value(*b.libraries);
            out_ << YAML::EndMap;
        }
        comment(b.rule_id);
    }
    out_ << YAML::EndSeq;
}

void RuleTextWriter::deny_paths(const std::vector<ast::PathItem>& list) {
    if (list.empty()) return;
    key("deny");
    out_ << YAML::BeginSeq;
    for (const auto& p : list) {
        if (p.rights == BW_FS_ALL && !p.unenforceable_run) {
            value(p.path);
        } else {
            out_ << YAML::Flow << YAML::BeginMap;
            key("path");
            value(p.path);
            if (p.rights != BW_FS_ALL) {
                key("rights");
                out_ << YAML::Flow << YAML::BeginSeq;
                // the bit order of the parser's names: read, write, create, remove, exec
                static constexpr const char* kRights[] = {"read", "write", "create", "remove", "exec"};
                for (uint32_t bit = 0; bit < 5; ++bit)
                    if (p.rights & (1u << bit)) out_ << kRights[bit];
                out_ << YAML::EndSeq;
            }
            if (p.unenforceable_run) key("unenforceable"), out_ << "run";
            out_ << YAML::EndMap;
        }
        comment(p.rule_id);
    }
    out_ << YAML::EndSeq;
}

void RuleTextWriter::files(const ast::Files& f) {
    if (!f.present) return;
    key("files");
    if (f.read.empty() && f.write.empty() && f.create.empty() && f.remove.empty() && f.exec.empty() &&
        f.deny.empty())
        return empty_map();
    out_ << YAML::BeginMap;
    paths("read", f.read);
    paths("write", f.write);
    paths("create", f.create);
    paths("remove", f.remove);
    paths("exec", f.exec);
    deny_paths(f.deny);
    out_ << YAML::EndMap;
}

void RuleTextWriter::net_items(std::string_view k, const std::vector<ast::NetItem>& list) {
    if (list.empty()) return;
    key(k);
    out_ << YAML::BeginSeq;
    for (const auto& n : list) {
        out_ << YAML::Flow << YAML::BeginMap;
        if (n.host) key("host"), value(*n.host);
        if (n.cidr) key("cidr"), value(*n.cidr);
        if (!n.ports.empty()) key("ports"), flow_scalars(n.ports);
        if (n.proto) key("proto"), value(*n.proto);
        if (n.unenforceable_run) key("unenforceable"), out_ << "run";
        out_ << YAML::EndMap;
        comment(n.rule_id);
    }
    out_ << YAML::EndSeq;
}

void RuleTextWriter::network(const ast::Network& n) {
    if (!n.present) return;
    if (!n.mapping) {
        // none | loopback. Entries a base's mapping left in the tree have no
        // place beside it (rule_file_text.h).
        entry("network", n.mode);
        return;
    }
    key("network");
    const bool unix = !n.unix_connect.empty() || !n.unix_send.empty() || !n.unix_bind.empty() ||
                      n.unix_unenforceable.has_value();
    if (n.families.empty() && n.netlink.empty() && n.connect.empty() && n.bind.empty() && n.send.empty() &&
        n.deny.empty() && n.dns.empty() && !unix)
        return empty_map();
    out_ << YAML::BeginMap;
    scalars("families", n.families);
    scalars("netlink", n.netlink);
    net_items("connect", n.connect);
    net_items("bind", n.bind);
    net_items("send", n.send);
    net_items("deny", n.deny);
    scalars("dns", n.dns);
    if (unix) {
        key("unix");
        out_ << YAML::BeginMap;
        scalars("connect", n.unix_connect);
        scalars("send", n.unix_send);
        scalars("bind", n.unix_bind);
        entry("unenforceable", n.unix_unenforceable);
        out_ << YAML::EndMap;
    }
    out_ << YAML::EndMap;
}

void RuleTextWriter::syscall_items(std::string_view k, const std::vector<ast::SyscallItem>& list) {
    if (list.empty()) return;
    key(k);
    out_ << YAML::BeginSeq;
    for (const auto& s : list) {
        if (s.args.empty() && !s.action && !s.errno_value) {
            value(s.name);
        } else {
            out_ << YAML::Flow << YAML::BeginMap;
            key("name");
            value(s.name);
            if (!s.args.empty()) {
                key("args");
                out_ << YAML::Flow << YAML::BeginSeq;
                for (const auto& a : s.args) {
                    out_ << YAML::Flow << YAML::BeginMap;
                    key("index"), value(a.index);
                    key("op"), value(a.op);
                    key("value"), value(a.value);
                    if (a.mask) key("mask"), value(*a.mask);
                    out_ << YAML::EndMap;
                }
                out_ << YAML::EndSeq;
            }
            if (s.action) key("action"), value(*s.action);
            if (s.errno_value) key("errno"), value(*s.errno_value);
            out_ << YAML::EndMap;
        }
        comment(s.rule_id);
    }
    out_ << YAML::EndSeq;
}

void RuleTextWriter::syscalls(const ast::Syscalls& s) {
    if (!s.present) return;
    key("syscalls");
    if (!s.baseline && !s.import && s.allow.empty() && s.deny.empty() && !s.on_violation && !s.has_architectures)
        return empty_map();
    out_ << YAML::BeginMap;
    if (s.import) {  // the import decides when both are set, as in the syscalls pass
        key("baseline");
        out_ << YAML::Flow << YAML::BeginMap;
        key("import");
        value(*s.import);
        out_ << YAML::EndMap;
        comment(s.import->rule_id);
    } else {
        entry("baseline", s.baseline);
    }
    syscall_items("allow", s.allow);
    syscall_items("deny", s.deny);
    if (const auto& v = s.on_violation) {
        key("on_violation");
        if (!v->errno_value) {
            value(v->action);
        } else {
            out_ << YAML::Flow << YAML::BeginMap;
            key("action"), value(v->action);
            key("errno"), value(*v->errno_value);
            out_ << YAML::EndMap;
        }
        comment(v->rule_id);
    }
    if (s.has_architectures) {
        if (s.architectures.empty()) key("architectures"), out_ << YAML::Flow << YAML::BeginSeq << YAML::EndSeq;
        scalars("architectures", s.architectures);
    }
    out_ << YAML::EndMap;
}

void RuleTextWriter::hardening(const ast::Hardening& h) {
    if (!h.present) return;
    key("hardening");
    if (!h.mte && h.require.empty() && h.warn.empty() && !h.store_bypass && !h.indirect_branch) {
        empty_map();
        return comment(h.rule_id);
    }
    comment(h.rule_id);  // the block is one rule: on the `hardening:` line
    out_ << YAML::BeginMap;
    entry("mte", h.mte);
    scalars("require", h.require);
    scalars("warn", h.warn);
    if (h.store_bypass || h.indirect_branch) {
        key("speculation");
        out_ << YAML::Flow << YAML::BeginMap;
        if (h.store_bypass) key("store_bypass"), value(*h.store_bypass);
        if (h.indirect_branch) key("indirect_branch"), value(*h.indirect_branch);
        out_ << YAML::EndMap;
    }
    out_ << YAML::EndMap;
}

void RuleTextWriter::environment(const ast::Environment& e) {
    if (!e.present) return;
    key("environment");
    if (e.pass.empty() && e.set.empty() && !e.clear) return empty_map();
    out_ << YAML::BeginMap;
    scalars("pass", e.pass);
    if (!e.set.empty()) {
        key("set");
        out_ << YAML::BeginMap;
        for (const auto& [name, v] : e.set) entry(name.value, v);
        out_ << YAML::EndMap;
    }
    entry("clear", e.clear);
    out_ << YAML::EndMap;
}

std::string RuleTextWriter::write(const ast::RuleFile& f) {
    out_ << YAML::BeginMap;
    entry("tool", f.tool);
    if (f.extends.size() == 1)
        entry("extends", f.extends.front());
    else
        scalars("extends", f.extends);
    entry("description", f.description);
    binaries(f.binaries);
    entry("mode", f.mode);
    scalars("mandatory", f.mandatory);
    entry("unenforceable", f.unenforceable);
    files(f.files);
    if (f.exec.present) {
        key("exec");
        if (f.exec.allow.empty()) {
            empty_map();
        } else {
            out_ << YAML::BeginMap;
            paths("allow", f.exec.allow);
            out_ << YAML::EndMap;
        }
    }
    network(f.network);
    syscalls(f.syscalls);
    keyed("limits", f.limits);
    keyed("microvm", f.microvm);
    keyed("profile", f.profile);
    hardening(f.hardening);
    environment(f.environment);
    out_ << YAML::EndMap;
    return std::string(out_.c_str()) + "\n";
}

}  // namespace

std::expected<FlatRuleFile, std::vector<Diagnostic>> flatten_rule_file(const std::string& path,
                                                                       const CompileOptions& opts) {
    CompileContext ctx(opts);
    bool begun = begin_compile_file(ctx, path);
    return flatten_begun(ctx, begun);
}

std::expected<FlatRuleFile, std::vector<Diagnostic>> flatten_rule_string(std::string_view text,
                                                                         std::string file_name,
                                                                         const CompileOptions& opts) {
    CompileContext ctx(opts);
    bool begun = begin_compile_string(ctx, text, std::move(file_name));
    return flatten_begun(ctx, begun);
}

std::string rule_file_text(const ast::RuleFile& file, const RuleComments& comments) {
    return RuleTextWriter(comments).write(file);
}

}  // namespace bulwark::policy
