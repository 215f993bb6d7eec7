#pragma once
// A rule file with its `extends:` chain merged in, and any rule file's AST
// written back as text in the language (docs/rule-language.md).
//
// flatten_rule_file() runs the compiler's own first steps (the parser and
// the extends pass, pass_manager.cpp) and stops before the other passes: the
// tree it returns is the one every later pass of a compile of that file
// reads. rule_file_text() writes a tree back as text: a flattened one as one
// rule file without `extends`, whose compile gives the bundle the original
// compiles to (the rule ids aside: in the text they are numbered in the
// order it is written); a tree that still extends other files (a draft,
// rule_writer.h) with its `extends`.
#include <cstdint>
#include <expected>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "bulwark/policy/ast.h"
#include "bulwark/policy/compiler.h"

namespace bulwark::policy {

struct FlatRuleFile {
    // The merged tree (bases first: lists appended, scalars overridden, the
    // keyed merges of pass_extends.cpp), `extends` emptied.
    ast::RuleFile ast;
    // Indexed by the rule ids the tree carries: the ids, places and texts a
    // compile of the same file gives its rules (Bundle::rules).
    std::vector<RuleRef> rules;
    SourceMap sources;  // the rule file and every base it read
};

// The file at `path` (bases searched in opts.rules_dirs, else its own
// directory) or `text` named `file_name` (bases in opts.rules_dirs only),
// merged. The error is every diagnostic of the parse and the extends pass,
// as a compile of the same input reports them.
std::expected<FlatRuleFile, std::vector<Diagnostic>> flatten_rule_file(const std::string& path,
                                                                       const CompileOptions& opts);
std::expected<FlatRuleFile, std::vector<Diagnostic>> flatten_rule_string(std::string_view text,
                                                                         std::string file_name,
                                                                         const CompileOptions& opts);

// Rule id -> a comment written after that rule's entry (`  # comment`).
using RuleComments = std::map<uint32_t, std::string>;

// `file` as a rule file: every key the tree holds, in the language's key
// order (tool, description, binaries, mode, mandatory, unenforceable, files,
// exec, network, syscalls, limits, microvm, profile, hardening,
// environment), lists in their order, the keyed sections (limits, microvm,
// profile, environment.set) in theirs. `extends` as the tree has it (a
// flattened tree has it merged in, and empty). Values are quoted where YAML needs it, and task variables
// (`${workdir}`) always. An entry whose rule id has a comment gets it on its
// line (a rule spanning several values, like `hardening:`, on the first).
//
// What a merge can give that one file cannot say is written as the nearest
// text: a scalar `network: none|loopback` over a base's network mapping
// keeps the base's entries in the tree, which are written under no key (the
// connect/bind/send/deny/dns lists are unused in that mode; the unix lists
// are in force in every mode and are lost in the text); a base file's own
// `unenforceable: run` (which covers that base's rules in a compile) is not
// in the tree, only the tool file's is; and a `hardening:` block merged from
// several files, one rule per file there, is one rule in the text.
std::string rule_file_text(const ast::RuleFile& file, const RuleComments& comments = {});

}  // namespace bulwark::policy
