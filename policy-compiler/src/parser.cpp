// Rule file -> AST. Input is checked before yaml-cpp sees it (size, BOM, NUL,
// UTF-8, nesting depth), then every mapping is checked for duplicate and
// unknown keys and every value for its type. Nothing is skipped: a key the
// parser does not know is an error, never ignored.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "context.h"

namespace bulwark::policy {

const std::vector<std::pair<std::string, std::vector<std::string>>>& accepted_keys() {
    static const std::vector<std::pair<std::string, std::vector<std::string>>> keys = {
        {"", {"tool", "description", "extends", "binaries", "mode", "mandatory", "unenforceable", "files", "exec",
              "network", "syscalls", "limits", "microvm", "profile", "hardening", "environment"}},
        {"binaries", {"path", "sha256", "libraries"}},
        {"files", {"read", "write", "create", "remove", "exec", "deny"}},
        {"files.deny", {"path", "rights", "unenforceable"}},
        {"exec", {"allow"}},
        {"network", {"families", "netlink", "connect", "bind", "send", "deny", "dns", "unix"}},
        {"network.unix", {"connect", "send", "bind", "unenforceable"}},
        {"network.rule", {"host", "cidr", "ports", "proto", "unenforceable"}},
        {"syscalls", {"baseline", "allow", "deny", "on_violation", "architectures"}},
        {"syscalls.baseline", {"import"}},
        {"syscalls.allow", {"name", "args"}},
        {"syscalls.args", {"index", "op", "value", "mask"}},
        {"syscalls.deny", {"name", "action", "errno"}},
        {"syscalls.on_violation", {"action", "errno"}},
        {"limits", {"memory", "pids", "cpu", "timeout", "output", "file_size", "open_files"}},
        {"microvm", {"mode", "memory", "vcpus", "confidential"}},
        {"profile", {"learn", "task_learn", "respond"}},
        {"hardening", {"mte", "require", "warn", "speculation"}},
        {"hardening.speculation", {"store_bypass", "indirect_branch"}},
        {"environment", {"pass", "set", "clear"}},
    };
    return keys;
}

namespace {
const char* file_type_name(std::filesystem::file_type t) {
    using std::filesystem::file_type;
    switch (t) {
        case file_type::symlink: return "a symbolic link";
        case file_type::block: return "a block device";
        case file_type::character: return "a character device";
        case file_type::fifo: return "a FIFO";
        case file_type::socket: return "a socket";
        default: return "neither a file nor a directory";
    }
}
}  // namespace

std::expected<std::string, std::string> read_text_file(const std::string& path, size_t max_bytes) {
    // What the path is, before it is opened: a directory opens as a stream
    // whose "size" is LLONG_MAX, and a FIFO would block the open.
    std::error_code ec;
    auto st = std::filesystem::status(path, ec);
    if (st.type() == std::filesystem::file_type::not_found)
        return std::unexpected("cannot open " + path + ": no such file or directory");
    if (ec) return std::unexpected("cannot open " + path + ": " + ec.message());
    if (st.type() == std::filesystem::file_type::directory)
        return std::unexpected(path + " is a directory, not a rule file (`policyc check DIR` checks every rule "
                                      "file below a directory)");
    if (st.type() != std::filesystem::file_type::regular)
        return std::unexpected(path + " is not a regular file (" + file_type_name(st.type()) + ")");
    std::ifstream in(path, std::ios::binary);
    if (!in) return std::unexpected("cannot open " + path + ": " + std::strerror(errno));
    in.seekg(0, std::ios::end);
    auto size = in.tellg();
    if (size < 0) return std::unexpected("cannot read " + path);
    if (size_t(size) > max_bytes)
        return std::unexpected(path + " is " + std::to_string(size_t(size)) + " bytes; the limit is " +
                               std::to_string(max_bytes) + " bytes");
    in.seekg(0);
    std::string text(size_t(size), '\0');
    in.read(text.data(), size);
    if (!in) return std::unexpected("cannot read " + path);
    return text;
}

namespace {

const std::vector<std::string>& keys_of(std::string_view section) {
    for (const auto& [s, k] : accepted_keys())
        if (s == section) return k;
    static const std::vector<std::string> none;
    return none;
}

// Line and column (1-based) of a byte offset.
SourceLoc loc_at(std::string_view text, const std::string& file, size_t off) {
    SourceLoc l{file, 1, 1};
    for (size_t i = 0; i < off && i < text.size(); ++i) {
        if (text[i] == '\n') {
            ++l.line;
            l.col = 1;
        } else {
            ++l.col;
        }
    }
    return l;
}

// Deepest nesting of the document, counted without recursion: block
// indentation levels plus `- `/`? ` markers opening a line, plus flow
// brackets. An upper bound of what yaml-cpp will recurse into.
std::optional<size_t> nesting_exceeds(std::string_view text, uint32_t max) {
    std::vector<size_t> indents;
    size_t flow = 0, i = 0;
    while (i < text.size()) {
        size_t line_start = i;
        size_t col = 0;
        while (i < text.size() && text[i] == ' ') ++i, ++col;
        bool blank = i >= text.size() || text[i] == '\n' || text[i] == '#' || text[i] == '\r';
        size_t depth_here = 0;
        if (!blank && flow == 0) {
            while (!indents.empty() && indents.back() > col) indents.pop_back();
            if (indents.empty() || indents.back() < col) indents.push_back(col);
            while (i + 1 < text.size() && (text[i] == '-' || text[i] == '?') &&
                   (text[i + 1] == ' ' || text[i + 1] == '\n')) {
                ++depth_here;
                i += 2;
                while (i < text.size() && text[i] == ' ') ++i;
            }
        }
        char quote = 0;
        for (; i < text.size() && text[i] != '\n'; ++i) {
            char c = text[i];
            if (quote) {
                if (c == quote) quote = 0;
                else if (c == '\\' && quote == '"') ++i;
                continue;
            }
            if (c == '"' || c == '\'') {
                if (i == line_start || text[i - 1] == ' ' || text[i - 1] == '[' || text[i - 1] == '{' ||
                    text[i - 1] == ',' || text[i - 1] == ':')
                    quote = c;
            } else if (c == '#' && (i == line_start || text[i - 1] == ' ')) {
                while (i < text.size() && text[i] != '\n') ++i;
                break;
            } else if (c == '[' || c == '{') {
                ++flow;
            } else if (c == ']' || c == '}') {
                if (flow) --flow;
            }
            if (indents.size() + depth_here + flow > max) return i;
        }
        if (indents.size() + depth_here + flow > max) return line_start;
        if (i < text.size()) ++i;
    }
    return std::nullopt;
}

std::string_view type_name(const YAML::Node& n) {
    switch (n.Type()) {
        case YAML::NodeType::Null: return "nothing";
        case YAML::NodeType::Scalar: return "a scalar";
        case YAML::NodeType::Sequence: return "a list";
        case YAML::NodeType::Map: return "a mapping";
        default: return "nothing";
    }
}

class Parser {
public:
    Parser(std::string_view text, const std::string& file, const InputLimits& limits, std::vector<RuleRef>& rules,
           std::vector<Diagnostic>& diags)
        : text_(text), file_(file), limits_(limits), rules_(rules), diags_(diags) {}

    bool run(ast::RuleFile& out);

private:
    std::string_view text_;
    const std::string& file_;
    const InputLimits& limits_;
    std::vector<RuleRef>& rules_;
    std::vector<Diagnostic>& diags_;
    size_t errors_ = 0;
    size_t nodes_ = 0;
    bool budget_reported_ = false;

    // ---- diagnostics ----
    void error(const ast::Span& span, std::string code, std::string msg, std::vector<std::string> hints = {}) {
        ++errors_;
        diags_.push_back({Severity::Error, span.loc, span.length, std::move(msg), std::move(hints), std::move(code)});
    }
    void error_at(size_t off, std::string code, std::string msg, std::vector<std::string> hints = {}) {
        error({loc_at(text_, file_, off), 1}, std::move(code), std::move(msg), std::move(hints));
    }

    bool budget(const YAML::Node& n) {
        if (++nodes_ <= limits_.max_nodes) return true;
        if (!budget_reported_) {
            budget_reported_ = true;
            error(span(n), "too-many-nodes",
                  "document has more than " + std::to_string(limits_.max_nodes) + " nodes (aliases count each use)");
        }
        return false;
    }

    uint32_t token_length(int pos) const { return pos < 0 ? 1 : source_token_length(text_, size_t(pos)); }

    ast::Span span(const YAML::Node& n) const {
        auto m = n.Mark();
        if (m.is_null() || m.line < 0) return {{file_, 0, 0}, 1};
        return {{file_, uint32_t(m.line + 1), uint32_t(m.column + 1)}, token_length(m.pos)};
    }

    // Compact flow-style text of a node, as a rule's display text.
    void flow(const YAML::Node& n, std::string& out, int depth = 0) {
        if (out.size() > 240 || depth > 8) return;
        switch (n.Type()) {
            case YAML::NodeType::Scalar: out += n.Scalar(); break;
            case YAML::NodeType::Sequence: {
                out += '[';
                bool first = true;
                for (const auto& e : n) {
                    if (!first) out += ", ";
                    first = false;
                    flow(e, out, depth + 1);
                }
                out += ']';
                break;
            }
            case YAML::NodeType::Map: {
                out += '{';
                bool first = true;
                for (const auto& kv : n) {
                    if (!first) out += ", ";
                    first = false;
                    flow(kv.first, out, depth + 1);
                    out += ": ";
                    flow(kv.second, out, depth + 1);
                }
                out += '}';
                break;
            }
            default: out += "null"; break;
        }
    }

    uint32_t add_rule(const std::string& section, const std::string& key, const YAML::Node& n) {
        std::string text = key + ": ";
        flow(n, text);
        if (text.size() > 240) text = text.substr(0, 237) + "...";
        uint32_t id = uint32_t(rules_.size());
        rules_.push_back(RuleRef{id, span(n).loc, std::move(text), section});
        return id;
    }

    // `unenforceable: run | refuse`: true for run.
    std::optional<bool> unenforceable(const YAML::Node& v, const std::string& what) {
        auto s = scalar(v, what);
        if (!s) return std::nullopt;
        if (s->value == "run") return true;
        if (s->value == "refuse") return false;
        error(s->span, "bad-value", "\"" + what + "\" must be run or refuse, not \"" + s->value + "\"",
              {"refuse (the default): a launch where no layer in force holds the rule is refused",
               "run: the tool starts anyway and the gap is recorded in its start record"});
        return std::nullopt;
    }
    void mark_unenforceable(uint32_t rule_id) {
        if (rule_id < rules_.size()) rules_[rule_id].unenforceable_run = true;
    }

    // ---- shape checks ----

    // Iterates a mapping, checking keys; calls f(key, value) for each known key.
    template <class F>
    bool each_key(const YAML::Node& map, std::string_view section, std::string_view where, F&& f) {
        const auto& known = keys_of(section);
        std::set<std::string, std::less<>> seen;
        bool ok = true;
        for (const auto& kv : map) {
            if (!budget(kv.first)) return false;
            if (!kv.first.IsScalar()) {
                error(span(kv.first), "bad-key", "keys must be plain names" + in(where));
                ok = false;
                continue;
            }
            const std::string& key = kv.first.Scalar();
            if (!seen.insert(key).second) {
                error(span(kv.first), "duplicate-key", "duplicate key \"" + key + "\"" + in(where),
                      {"a key may appear only once in a mapping; merge the two entries"});
                ok = false;
                continue;
            }
            if (std::find(known.begin(), known.end(), key) == known.end()) {
                std::vector<std::string> hints;
                if (auto m = closest_match(key, known); !m.empty()) hints.push_back("did you mean \"" + m + "\"?");
                else hints.push_back("known keys" + in(where) + ": " + join(known));
                error(span(kv.first), "unknown-key", "unknown key \"" + key + "\"" + in(where), std::move(hints));
                ok = false;
                continue;
            }
            if (!f(key, kv.second)) ok = false;
        }
        return ok;
    }

    static std::string in(std::string_view where) {
        return where.empty() ? std::string(" at the top level") : " in \"" + std::string(where) + "\"";
    }
    static std::string join(const std::vector<std::string>& v) {
        std::string s;
        for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
        return s;
    }

    bool expect_map(const YAML::Node& n, const std::string& what) {
        if (n.IsMap()) return true;
        error(span(n), "wrong-type", "\"" + what + "\" must be a mapping, not " + std::string(type_name(n)));
        return false;
    }
    bool expect_seq(const YAML::Node& n, const std::string& what, std::string_view of) {
        if (n.IsSequence()) return true;
        std::vector<std::string> hints;
        if (n.IsScalar()) hints.push_back("write a list: " + what.substr(what.rfind('.') + 1) + ": [" + n.Scalar() + "]");
        error(span(n), "wrong-type", "\"" + what + "\" must be a list of " + std::string(of) + ", not " +
                                         std::string(type_name(n)),
              std::move(hints));
        return false;
    }

    std::optional<ast::Scalar> scalar(const YAML::Node& n, const std::string& what, uint32_t rule_id = 0,
                                      size_t max = 0) {
        if (!budget(n)) return std::nullopt;
        if (!n.IsScalar()) {
            error(span(n), "wrong-type", "\"" + what + "\" must be a single value, not " + std::string(type_name(n)));
            return std::nullopt;
        }
        size_t limit = max ? max : limits_.max_string_bytes;
        if (n.Scalar().size() > limit) {
            error(span(n), "string-too-long",
                  "value of \"" + what + "\" is " + std::to_string(n.Scalar().size()) + " bytes; the limit is " +
                      std::to_string(limit));
            return std::nullopt;
        }
        if (n.Scalar().find('\0') != std::string::npos) {
            error(span(n), "nul-byte", "NUL character in \"" + what + "\"");
            return std::nullopt;
        }
        return ast::Scalar{n.Scalar(), span(n), rule_id};
    }

    // A list of scalars, each its own rule.
    void scalar_list(const YAML::Node& n, const std::string& section, const std::string& what,
                     std::string_view of, std::vector<ast::Scalar>& out, bool rules = true) {
        if (!expect_seq(n, what, of)) return;
        for (const auto& e : n) {
            if (!budget(e)) return;
            uint32_t id = rules && e.IsScalar() ? add_rule(section, what, e) : 0;
            if (auto s = scalar(e, what + " entry", id)) out.push_back(std::move(*s));
        }
    }

    void path_list(const YAML::Node& n, const std::string& section, const std::string& what,
                   std::vector<ast::PathItem>& out, uint32_t rights) {
        if (!expect_seq(n, what, "paths")) return;
        for (const auto& e : n) {
            if (!budget(e)) return;
            if (!e.IsScalar()) {
                error(span(e), "wrong-type", "\"" + what + "\" entries must be paths, not " + std::string(type_name(e)));
                continue;
            }
            uint32_t id = add_rule(section, what, e);
            if (auto s = scalar(e, what, id)) out.push_back({std::move(*s), rights, id, span(e)});
        }
    }

    // ---- sections ----
    void parse_top(const YAML::Node& root, ast::RuleFile& f);
    void parse_binaries(const YAML::Node& n, ast::RuleFile& f);
    void parse_files(const YAML::Node& n, ast::Files& f);
    void parse_network(const YAML::Node& n, ast::Network& net);
    void parse_net_rules(const YAML::Node& n, const std::string& what, std::vector<ast::NetItem>& out);
    void parse_syscalls(const YAML::Node& n, ast::Syscalls& s);
    void parse_syscall_list(const YAML::Node& n, const std::string& what, bool allow,
                            std::vector<ast::SyscallItem>& out);
    void parse_hardening(const YAML::Node& n, ast::Hardening& h);
    // A section of scalars, one rule per key ("limits.memory: 256MiB").
    bool keyed_scalars(const YAML::Node& n, const std::string& section,
                       std::vector<std::pair<std::string, ast::Scalar>>& out) {
        if (!expect_map(n, section)) return false;
        each_key(n, section, section, [&](const std::string& k, const YAML::Node& val) {
            uint32_t id = add_rule(section, section + "." + k, val);
            if (auto s = scalar(val, section + "." + k, id)) out.emplace_back(k, std::move(*s));
            return true;
        });
        return true;
    }
    void parse_environment(const YAML::Node& n, ast::Environment& e);
};

bool Parser::run(ast::RuleFile& out) {
    out.file = file_;
    size_t errors_before = errors_;
    if (text_.size() > limits_.max_file_bytes) {
        error({{file_, 0, 0}, 1}, "file-too-large",
              "file is " + std::to_string(text_.size()) + " bytes; the limit is " +
                  std::to_string(limits_.max_file_bytes) + " bytes");
        return false;
    }
    if (text_.starts_with("\xEF\xBB\xBF")) {
        error_at(0, "bom", "file starts with a UTF-8 byte order mark",
                 {"rule files are UTF-8 without a BOM; remove the first three bytes"});
        return false;
    }
    if (auto nul = text_.find('\0'); nul != std::string_view::npos) {
        error_at(nul, "nul-byte", "NUL byte in rule file");
        return false;
    }
    if (auto bad = check_utf8(text_); !bad) {
        error_at(bad.error(), "invalid-utf8", "invalid UTF-8 in rule file");
        return false;
    }
    if (auto deep = nesting_exceeds(text_, limits_.max_nesting)) {
        error_at(*deep, "too-deep",
                 "nesting deeper than " + std::to_string(limits_.max_nesting) + " levels");
        return false;
    }
    YAML::Node root;
    try {
        root = YAML::Load(std::string(text_));
    } catch (const YAML::Exception& e) {
        ast::Span sp{{file_, uint32_t(std::max(0, e.mark.line) + 1), uint32_t(std::max(0, e.mark.column) + 1)}, 1};
        if (e.mark.is_null()) sp = {{file_, 0, 0}, 1};
        error(sp, "yaml-syntax", "YAML syntax error: " + e.msg);
        return false;
    }
    if (root.IsNull() || !root.IsDefined()) {
        error({{file_, 0, 0}, 1}, "empty-file", "rule file is empty", {"a rule file needs at least `tool:`"});
        return false;
    }
    if (!root.IsMap()) {
        error(span(root), "wrong-type", "a rule file must be a mapping of sections, not " + std::string(type_name(root)));
        return false;
    }
    size_t first_rule = rules_.size();
    parse_top(root, out);
    // A file's own `unenforceable: run` covers every rule written in it.
    if (out.unenforceable)
        for (size_t i = first_rule; i < rules_.size(); ++i) rules_[i].unenforceable_run = true;
    return errors_ == errors_before;
}

void Parser::parse_top(const YAML::Node& root, ast::RuleFile& f) {
    each_key(root, "", "", [&](const std::string& key, const YAML::Node& v) {
        if (key == "tool") {
            f.tool = scalar(v, key, add_rule("tool", key, v));
        } else if (key == "description") {
            f.description = scalar(v, key, 0, limits_.max_description_bytes);
        } else if (key == "mode") {
            f.mode = scalar(v, key, add_rule("mode", key, v));
        } else if (key == "extends") {
            if (v.IsScalar()) {
                if (auto s = scalar(v, key)) f.extends.push_back(*s);
            } else {
                scalar_list(v, "extends", key, "rule names", f.extends, false);
            }
        } else if (key == "mandatory") {
            scalar_list(v, "mandatory", key, "layer names", f.mandatory);
        } else if (key == "unenforceable") {
            if (auto u = unenforceable(v, key); u && *u) f.unenforceable = scalar(v, key);
        } else if (key == "binaries") {
            parse_binaries(v, f);
        } else if (key == "files") {
            parse_files(v, f.files);
        } else if (key == "exec") {
            if (!expect_map(v, key)) return false;
            f.exec.present = true;
            f.exec.span = span(v);
            each_key(v, "exec", "exec", [&](const std::string& k, const YAML::Node& val) {
                (void)k;
                path_list(val, "exec", "exec.allow", f.exec.allow, BW_FS_EXEC);
                return true;
            });
        } else if (key == "network") {
            parse_network(v, f.network);
        } else if (key == "syscalls") {
            parse_syscalls(v, f.syscalls);
        } else if (key == "limits") {
            return keyed_scalars(v, key, f.limits);
        } else if (key == "microvm") {
            return keyed_scalars(v, key, f.microvm);
        } else if (key == "profile") {
            // An empty block would turn nothing on while it reads as if it did.
            if (v.IsMap() && v.size() == 0)
                error(span(v), "empty-section", "\"profile\" is empty: it learns and scores nothing",
                      {"write the runs to learn from and the response, e.g. profile: {learn: 20, respond: record}"});
            return keyed_scalars(v, key, f.profile);
        } else if (key == "hardening") {
            parse_hardening(v, f.hardening);
        } else if (key == "environment") {
            parse_environment(v, f.environment);
        }
        return true;
    });
}

void Parser::parse_binaries(const YAML::Node& n, ast::RuleFile& f) {
    if (!expect_seq(n, "binaries", "paths")) return;
    for (const auto& e : n) {
        if (!budget(e)) return;
        uint32_t id = add_rule("binaries", "binaries", e);
        if (e.IsScalar()) {
            if (auto s = scalar(e, "binaries", id)) f.binaries.push_back({std::move(*s), std::nullopt, std::nullopt, id});
            continue;
        }
        if (!e.IsMap()) {
            error(span(e), "wrong-type", "\"binaries\" entries must be a path or { path, sha256, libraries }, not " +
                                             std::string(type_name(e)));
            continue;
        }
        ast::BinaryItem b;
        b.rule_id = id;
        bool has_path = false;
        each_key(e, "binaries", "binaries", [&](const std::string& k, const YAML::Node& val) {
            auto s = scalar(val, "binaries." + k, id);
            if (!s) return false;
            if (k == "path") {
                b.path = *s;
                has_path = true;
            } else if (k == "libraries") {
                b.libraries = *s;
            } else {
                b.sha256 = *s;
            }
            return true;
        });
        if (!has_path) error(span(e), "missing-key", "binary entry needs \"path\"");
        else f.binaries.push_back(std::move(b));
    }
}

void Parser::parse_files(const YAML::Node& n, ast::Files& f) {
    if (!expect_map(n, "files")) return;
    f.present = true;
    f.span = span(n);
    each_key(n, "files", "files", [&](const std::string& k, const YAML::Node& v) {
        std::string what = "files." + k;
        if (k == "read") path_list(v, "files", what, f.read, BW_FS_READ);
        else if (k == "write") path_list(v, "files", what, f.write, BW_FS_WRITE);
        else if (k == "create") path_list(v, "files", what, f.create, BW_FS_CREATE);
        else if (k == "remove") path_list(v, "files", what, f.remove, BW_FS_REMOVE);
        else if (k == "exec") path_list(v, "files", what, f.exec, BW_FS_EXEC);
        else if (k == "deny") {
            if (!expect_seq(v, what, "paths")) return false;
            for (const auto& e : v) {
                if (!budget(e)) return false;
                uint32_t id = add_rule("files", what, e);
                if (e.IsScalar()) {
                    if (auto s = scalar(e, what, id)) f.deny.push_back({std::move(*s), BW_FS_ALL, id, span(e)});
                    continue;
                }
                if (!e.IsMap()) {
                    error(span(e), "wrong-type",
                          "\"files.deny\" entries must be a path or { path, rights }, not " + std::string(type_name(e)));
                    continue;
                }
                ast::PathItem item;
                item.rule_id = id;
                item.span = span(e);
                bool has_path = false, ok = true;
                item.rights = BW_FS_ALL;
                each_key(e, "files.deny", what, [&](const std::string& dk, const YAML::Node& dv) {
                    if (dk == "unenforceable") {
                        auto u = unenforceable(dv, what + ".unenforceable");
                        if (!u) return ok = false;
                        if (*u) mark_unenforceable(id);
                        item.unenforceable_run = *u;
                        return true;
                    }
                    if (dk == "path") {
                        auto s = scalar(dv, what + ".path", id);
                        if (!s) return ok = false;
                        item.path = *s;
                        has_path = true;
                        return true;
                    }
                    if (!expect_seq(dv, what + ".rights", "rights")) return ok = false;
                    if (dv.size() == 0) {
                        error(span(dv), "empty-list", "\"files.deny.rights\" is empty: the entry would deny nothing",
                              {"remove the entry, or leave out `rights:` to deny every right"});
                        return ok = false;
                    }
                    item.rights = 0;
                    static const std::vector<std::string> names = {"read", "write", "create", "remove", "exec"};
                    for (const auto& r : dv) {
                        auto s = scalar(r, what + ".rights");
                        if (!s) {
                            ok = false;
                            continue;
                        }
                        auto it = std::find(names.begin(), names.end(), s->value);
                        if (it == names.end()) {
                            std::vector<std::string> hints;
                            if (auto m = closest_match(s->value, names); !m.empty())
                                hints.push_back("did you mean \"" + m + "\"?");
                            hints.push_back("rights: read, write, create, remove, exec");
                            error(s->span, "unknown-right", "unknown right \"" + s->value + "\"", std::move(hints));
                            ok = false;
                            continue;
                        }
                        item.rights |= 1u << (it - names.begin());
                    }
                    return ok;
                });
                if (!has_path) {
                    error(span(e), "missing-key", "\"files.deny\" entry needs \"path\"");
                    ok = false;
                }
                if (ok) f.deny.push_back(std::move(item));
            }
        }
        return true;
    });
}

void Parser::parse_network(const YAML::Node& n, ast::Network& net) {
    net.present = true;
    net.span = span(n);
    if (n.IsScalar()) {
        net.rule_id = add_rule("network", "network", n);
        net.mode = scalar(n, "network", net.rule_id);
        return;
    }
    if (!n.IsMap()) {
        error(span(n), "wrong-type", "\"network\" must be none, loopback or a mapping, not " + std::string(type_name(n)));
        return;
    }
    net.mapping = true;
    net.rule_id = 0;
    each_key(n, "network", "network", [&](const std::string& k, const YAML::Node& v) {
        std::string what = "network." + k;
        if (k == "families") scalar_list(v, "network", what, "family names", net.families);
        else if (k == "netlink") scalar_list(v, "network", what, "netlink protocol names", net.netlink);
        else if (k == "dns") scalar_list(v, "network", what, "addresses", net.dns);
        else if (k == "connect") parse_net_rules(v, what, net.connect);
        else if (k == "bind") parse_net_rules(v, what, net.bind);
        else if (k == "send") parse_net_rules(v, what, net.send);
        else if (k == "deny") parse_net_rules(v, what, net.deny);
        else if (k == "unix") {
            if (!expect_map(v, what)) return false;
            each_key(v, "network.unix", what, [&](const std::string& uk, const YAML::Node& uv) {
                std::string w = what + "." + uk;
                if (uk == "unenforceable") {
                    auto u = unenforceable(uv, w);
                    if (u && *u) {
                        uint32_t id = add_rule("network", w, uv);
                        mark_unenforceable(id);
                        net.unix_unenforceable = scalar(uv, w, id);
                    }
                    return true;
                }
                if (uv.IsSequence() && uv.size() == 0) {
                    error(span(uv), "empty-list", "\"" + w + "\" is empty: it would allow nothing",
                          {"remove the key, or list socket paths (/run/app.sock), directories (/run/app/) or @names"});
                    return false;
                }
                scalar_list(uv, "network", w, "socket paths or @names",
                            uk == "connect" ? net.unix_connect : uk == "send" ? net.unix_send : net.unix_bind);
                return true;
            });
        }
        return true;
    });
}

void Parser::parse_net_rules(const YAML::Node& n, const std::string& what, std::vector<ast::NetItem>& out) {
    if (!expect_seq(n, what, "{ host | cidr, ports, proto } entries")) return;
    for (const auto& e : n) {
        if (!budget(e)) return;
        if (!e.IsMap()) {
            error(span(e), "wrong-type",
                  "\"" + what + "\" entries must be mappings like { cidr: 10.0.0.0/8, ports: [443] }, not " +
                      std::string(type_name(e)));
            continue;
        }
        ast::NetItem item;
        item.rule_id = add_rule("network", what, e);
        item.span = span(e);
        bool ok = each_key(e, "network.rule", what, [&](const std::string& k, const YAML::Node& v) {
            std::string w = what + "." + k;
            if (k == "unenforceable") {
                auto u = unenforceable(v, w);
                if (u && *u) mark_unenforceable(item.rule_id);
                item.unenforceable_run = u.value_or(false);
                return u.has_value();
            }
            if (k == "ports") {
                if (!expect_seq(v, w, "ports")) return false;
                if (v.size() == 0) {
                    error(span(v), "empty-list", "\"" + w + "\" is empty", {"leave out `ports:` to mean every port"});
                    return false;
                }
                for (const auto& p : v) {
                    auto s = scalar(p, w, item.rule_id);
                    if (!s) return false;
                    item.ports.push_back(std::move(*s));
                }
                return true;
            }
            auto s = scalar(v, w, item.rule_id);
            if (!s) return false;
            if (k == "host") item.host = std::move(*s);
            else if (k == "cidr") item.cidr = std::move(*s);
            else item.proto = std::move(*s);
            return true;
        });
        if (ok && item.host && item.cidr) {
            error(item.span, "host-and-cidr", "\"" + what + "\" entry has both host and cidr",
                  {"write two entries, one per destination"});
            ok = false;
        } else if (ok && !item.host && !item.cidr) {
            error(item.span, "missing-key", "\"" + what + "\" entry needs host or cidr",
                  {"for any address write cidr: 0.0.0.0/0 and cidr: ::/0"});
            ok = false;
        }
        if (ok) out.push_back(std::move(item));
    }
}

void Parser::parse_syscall_list(const YAML::Node& n, const std::string& what, bool allow,
                                std::vector<ast::SyscallItem>& out) {
    if (!expect_seq(n, what, "syscall names")) return;
    for (const auto& e : n) {
        if (!budget(e)) return;
        ast::SyscallItem item;
        item.rule_id = add_rule("syscalls", what, e);
        item.span = span(e);
        if (e.IsScalar()) {
            auto s = scalar(e, what, item.rule_id);
            if (!s) continue;
            item.name = std::move(*s);
            out.push_back(std::move(item));
            continue;
        }
        if (!e.IsMap()) {
            error(span(e), "wrong-type", "\"" + what + "\" entries must be a name or a mapping, not " +
                                             std::string(type_name(e)));
            continue;
        }
        bool has_name = false;
        bool ok = each_key(e, allow ? "syscalls.allow" : "syscalls.deny", what,
                           [&](const std::string& k, const YAML::Node& v) {
            if (k == "args") {
                if (!expect_seq(v, what + ".args", "argument conditions")) return false;
                bool good = true;
                for (const auto& a : v) {
                    if (!budget(a)) return false;
                    if (!expect_map(a, what + ".args[]")) {
                        good = false;
                        continue;
                    }
                    ast::ArgItem arg;
                    arg.span = span(a);
                    bool has_index = false, has_op = false, has_value = false;
                    good &= each_key(a, "syscalls.args", what + ".args", [&](const std::string& ak, const YAML::Node& av) {
                        auto s = scalar(av, what + ".args." + ak, item.rule_id);
                        if (!s) return false;
                        if (ak == "index") arg.index = *s, has_index = true;
                        else if (ak == "op") arg.op = *s, has_op = true;
                        else if (ak == "value") arg.value = *s, has_value = true;
                        else arg.mask = *s;
                        return true;
                    });
                    if (!has_index || !has_op || !has_value) {
                        error(arg.span, "missing-key", "argument condition needs index, op and value");
                        good = false;
                        continue;
                    }
                    item.args.push_back(std::move(arg));
                }
                return good;
            }
            auto s = scalar(v, what + "." + k, item.rule_id);
            if (!s) return false;
            if (k == "name") item.name = *s, has_name = true;
            else if (k == "action") item.action = *s;
            else item.errno_value = *s;
            return true;
        });
        if (!has_name) {
            if (ok) error(item.span, "missing-key", "\"" + what + "\" entry needs \"name\"");
            continue;
        }
        if (ok) out.push_back(std::move(item));
    }
}

void Parser::parse_syscalls(const YAML::Node& n, ast::Syscalls& s) {
    if (!expect_map(n, "syscalls")) return;
    s.present = true;
    s.span = span(n);
    each_key(n, "syscalls", "syscalls", [&](const std::string& k, const YAML::Node& v) {
        if (k == "baseline") {
            uint32_t id = add_rule("syscalls", "syscalls.baseline", v);
            if (v.IsMap()) {
                return each_key(v, "syscalls.baseline", "syscalls.baseline",
                                [&](const std::string&, const YAML::Node& iv) {
                    s.import = scalar(iv, "syscalls.baseline.import", id);
                    return s.import.has_value();
                });
            }
            s.baseline = scalar(v, "syscalls.baseline", id);
        } else if (k == "allow") {
            parse_syscall_list(v, "syscalls.allow", true, s.allow);
        } else if (k == "deny") {
            parse_syscall_list(v, "syscalls.deny", false, s.deny);
        } else if (k == "architectures") {
            if (v.IsSequence()) {
                s.architectures_span = span(v);
                s.has_architectures = true;
            }
            scalar_list(v, "syscalls", "syscalls.architectures", "ABI names", s.architectures);
        } else if (k == "on_violation") {
            ast::Violation viol;
            viol.rule_id = add_rule("syscalls", "syscalls.on_violation", v);
            if (v.IsScalar()) {
                auto a = scalar(v, "syscalls.on_violation", viol.rule_id);
                if (!a) return false;
                viol.action = *a;
                s.on_violation = viol;
                return true;
            }
            if (!expect_map(v, "syscalls.on_violation")) return false;
            bool has_action = false;
            bool ok = each_key(v, "syscalls.on_violation", "syscalls.on_violation",
                               [&](const std::string& vk, const YAML::Node& vv) {
                auto a = scalar(vv, "syscalls.on_violation." + vk, viol.rule_id);
                if (!a) return false;
                if (vk == "action") viol.action = *a, has_action = true;
                else viol.errno_value = *a;
                return true;
            });
            if (!has_action) {
                error(span(v), "missing-key", "\"syscalls.on_violation\" needs \"action\"");
                return false;
            }
            if (ok) s.on_violation = viol;
        }
        return true;
    });
}

void Parser::parse_hardening(const YAML::Node& n, ast::Hardening& h) {
    if (!expect_map(n, "hardening")) return;
    h.present = true;
    h.rule_id = add_rule("hardening", "hardening", n);
    each_key(n, "hardening", "hardening", [&](const std::string& k, const YAML::Node& v) {
        if (k == "mte") h.mte = scalar(v, "hardening.mte", h.rule_id);
        else if (k == "require") scalar_list(v, "hardening", "hardening.require", "properties", h.require);
        else if (k == "warn") scalar_list(v, "hardening", "hardening.warn", "properties", h.warn);
        else if (k == "speculation") {
            if (!expect_map(v, "hardening.speculation")) return false;
            return each_key(v, "hardening.speculation", "hardening.speculation",
                            [&](const std::string& sk, const YAML::Node& sv) {
                auto s = scalar(sv, "hardening.speculation." + sk, h.rule_id);
                if (!s) return false;
                (sk == "store_bypass" ? h.store_bypass : h.indirect_branch) = *s;
                return true;
            });
        }
        return true;
    });
}

void Parser::parse_environment(const YAML::Node& n, ast::Environment& e) {
    if (!expect_map(n, "environment")) return;
    e.present = true;
    each_key(n, "environment", "environment", [&](const std::string& k, const YAML::Node& v) {
        if (k == "pass") {
            scalar_list(v, "environment", "environment.pass", "variable names", e.pass);
        } else if (k == "clear") {
            e.clear = scalar(v, "environment.clear", add_rule("environment", "environment.clear", v));
        } else {
            if (!expect_map(v, "environment.set")) return false;
            std::set<std::string, std::less<>> seen;
            for (const auto& kv : v) {
                if (!budget(kv.first)) return false;
                auto name = scalar(kv.first, "environment.set name");
                if (!name) continue;
                if (!seen.insert(name->value).second) {
                    error(name->span, "duplicate-key", "duplicate key \"" + name->value + "\" in \"environment.set\"");
                    continue;
                }
                uint32_t id = add_rule("environment", "environment.set." + name->value, kv.second);
                name->rule_id = id;
                auto val = scalar(kv.second, "environment.set." + name->value, id);
                if (val) e.set.emplace_back(std::move(*name), std::move(*val));
            }
        }
        return true;
    });
}

}  // namespace

uint32_t source_token_length(std::string_view text_, size_t pos) {
    if (pos >= text_.size()) return 1;
    size_t p = pos, i = p;
    char c = text_[p];
    auto eol = [&](size_t k) { return k >= text_.size() || text_[k] == '\n' || text_[k] == '\r'; };
    if (c == '"' || c == '\'') {
        for (i = p + 1; !eol(i); ++i) {
            if (c == '"' && text_[i] == '\\') {
                ++i;
                continue;
            }
            if (text_[i] == c) {
                if (c == '\'' && i + 1 < text_.size() && text_[i + 1] == '\'') {
                    ++i;
                    continue;
                }
                return uint32_t(i - p + 1);
            }
        }
        return uint32_t(i - p);
    }
    if (c == '[' || c == '{') {
        int depth = 0;
        char q = 0;
        for (i = p; !eol(i); ++i) {
            char d = text_[i];
            if (q) {
                if (d == q) q = 0;
                continue;
            }
            if (d == '"' || d == '\'') q = d;
            else if (d == '[' || d == '{') ++depth;
            else if ((d == ']' || d == '}') && --depth == 0) return uint32_t(i - p + 1);
        }
        return 1;
    }
    for (i = p; !eol(i); ++i) {
        char d = text_[i];
        if (d == ',' || d == ']' || d == '}') break;
        if (d == ':' && (eol(i + 1) || text_[i + 1] == ' ')) break;
        if (d == '#' && i > p && text_[i - 1] == ' ') break;
    }
    while (i > p && text_[i - 1] == ' ') --i;
    return uint32_t(std::max<size_t>(1, i - p));
}


bool parse_rule_file(std::string_view text, const std::string& file, const InputLimits& limits,
                     std::vector<RuleRef>& rules, std::vector<Diagnostic>& diags, ast::RuleFile& out) {
    Parser p(text, file, limits, rules, diags);
    return p.run(out);
}

}  // namespace bulwark::policy
