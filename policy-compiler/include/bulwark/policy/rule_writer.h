#pragma once
// A rule file written from its parts, in the language policyc reads
// (docs/rule-language.md): what agentd proposes for the operations a tool's
// recorded runs were refused (POST /v1/propose). Entries keep the order they
// were first added in, without repeats. The draft is a rule file's tree
// (ast.h), written by rule_file_text (rule_file_text.h) like every rule file
// agentd writes: blocks in the language's key order, a value quoted wherever
// YAML needs it and a task variable always.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "bulwark/policy/ast.h"

namespace bulwark::policy {

enum class DraftSection : uint8_t {
    FilesRead,
    FilesWrite,
    FilesCreate,
    FilesRemove,
    ExecAllow,
    NetworkConnect,
    NetworkBind,
    NetworkSend,
    NetworkUnixConnect,  // network.unix.connect (paths or @names, add_path)
    NetworkUnixSend,
    NetworkUnixBind,
    SyscallsAllow,
    SyscallsArchitectures,
};

// One network rule of a draft: an address (IPv4 as a.b.c.d/32, IPv6 as
// .../128), one port, one protocol ("tcp" or "udp").
struct DraftNetRule {
    std::string cidr;
    uint16_t port = 0;
    std::string proto;
    bool operator==(const DraftNetRule&) const = default;
};

class RuleFileWriter {
public:
    // `comment`: the file's first lines (written as # comments).
    RuleFileWriter(std::string tool, std::string extends, std::string comment);

    // `comment`, when given, is written after the entry (# ...): where it
    // came from. An entry already there keeps its first comment.
    // A path (files.*, exec.allow): written double-quoted, ${variables} kept.
    void add_path(DraftSection section, std::string path, std::string comment = {});
    // A name (syscalls.allow, syscalls.architectures).
    void add_name(DraftSection section, std::string name, std::string comment = {});
    // A network rule (network.connect, .bind, .send).
    void add_net(DraftSection section, DraftNetRule rule, std::string comment = {});
    // Entries in all sections.
    size_t size() const;
    // Whether `section` has the path or name `value`.
    bool has(DraftSection section, std::string_view value) const;

    bool empty() const;
    std::string text() const;

private:
    // A new entry's rule id, with its comment.
    uint32_t next_rule(std::string comment);
    ast::Scalar scalar(std::string value, uint32_t rule_id) const;

    std::string comment_;
    ast::RuleFile file_;
    std::map<uint32_t, std::string> comments_;  // rule id -> comment
    std::map<DraftSection, std::vector<std::string>> seen_;  // what each section holds, as added
    uint32_t rules_ = 0;
};

}  // namespace bulwark::policy
