#pragma once
// A rule file written from its parts, in the language policyc reads
// (docs/rule-language.md): what agentd proposes for the operations a tool's
// recorded runs were refused (POST /v1/propose). Entries keep the order they
// were first added in, without repeats; sections of one block (files, exec,
// network, syscalls) are written together. The text is emitted by yaml-cpp,
// so a path or name is quoted wherever YAML needs it.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

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
    struct Entry {
        std::string value;  // a path or a name
        DraftNetRule net;   // network sections
        bool quoted = false;
        std::string comment;
        bool operator==(const Entry& o) const { return value == o.value && net == o.net && quoted == o.quoted; }
    };
    void add(DraftSection section, Entry e);

    std::string tool_, extends_, comment_;
    std::vector<std::pair<DraftSection, std::vector<Entry>>> sections_;
};

}  // namespace bulwark::policy
