#pragma once
// The reference evaluator: what the enforcement layers decide for one
// concrete operation under an instantiated bundle, which layer decides, the
// rule that decided, and an explanation a model can act on.
//
// Two independent paths:
//   evaluate()        from the bundle's rules (FileRule, NetRule) and, for
//                     syscalls, the compiled seccomp program run through the
//                     classic-BPF interpreter (cbpf.h);
//   evaluate_tables() from the exact BPF map contents (bundle.bpf), walking
//                     them the way the BPF programs do.
// Unit tests require both to agree; the BPF programs are tested against them.
#include <array>
#include <cstdint>
#include <expected>
#include <string>
#include <string_view>

#include "bulwark/policy/bundle.h"
#include "bulwark/policy/match.h"

namespace bulwark::policy {

enum class OpKind : uint8_t { Open, Create, Remove, Exec, Connect, Bind, Send, Socket, Syscall };
enum class FileAccess : uint8_t { Read, Write };

struct Operation {
    OpKind kind = OpKind::Open;
    // Open, Create, Remove, Exec
    std::string path;                   // absolute; normalised before matching
    FileAccess access = FileAccess::Read;  // Open only
    // Connect, Bind, Send
    Addr16 addr{};                      // IPv4 as v4-mapped
    uint16_t port = 0;
    uint8_t proto = BW_PROTO_TCP;       // one BW_PROTO_* bit
    // Connect, Send to a unix socket (then addr/port/proto are unused):
    // "/path" as the tool writes it (judged as written: only an absolute,
    // normalised path can match a rule), or "@name" for an abstract name.
    std::string unix_addr;
    // Socket
    uint32_t family = 0;                // AF_*
    uint32_t type = 0;                  // SOCK_*; SOCK_NONBLOCK/CLOEXEC bits ignored
    // Syscall
    std::string syscall;
    std::array<uint64_t, 6> args{};
    uint32_t arch = 0;                  // AUDIT_ARCH_*; 0: the host's native arch
};

enum class Verdict : uint8_t { Allow, Deny, Audit };

struct Decision {
    Verdict verdict = Verdict::Deny;
    uint16_t layer = BW_LAYER_NONE;     // BW_LAYER_*
    // The rule id the kernel reports for this decision; BW_NO_RULE when the
    // layer's default decided. Files: the deepest covering path carrying the
    // right decides, and its map entry names the first rule on that path with
    // allow (deny) bits, which may be another list than the right's (the
    // explanation names the rule that carries the right). Network: the first
    // matching range of the longest-prefix entry (bpf_tables.h range_before).
    uint32_t rule_id = BW_NO_RULE;
    std::string explanation;
    // The rule that carries the operation's right itself, for people: a
    // files rule of the right's own list (`files.create: ${workdir}`, where
    // rule_id may name `files.read` on the same path). Other kinds: rule_id.
    uint32_t right_rule_id = BW_NO_RULE;
};

Decision evaluate(const Bundle& bundle, const Operation& op);
Decision evaluate_tables(const Bundle& bundle, const Operation& op);

// Renaming (rename = true) or hard-linking the object at `from` to the new
// name `to`, as the BPF LSM judges it: a rename needs remove at `from`, both
// need create at `to`, and the object may not gain a content right (read,
// write, exec) at `to` it does not have at `from`. The rule id is the failing
// check's (for a gain: the deepest rule at `to` granting a gained right), or
// the create decision's when allowed. From the bundle's rules.
Decision evaluate_move(const Bundle& bundle, const std::string& from, const std::string& to, bool rename);

// BW_FS_* right an operation needs (0 for non-file operations).
uint32_t required_right(const Operation& op);

std::string_view to_string(Verdict v);
std::string_view to_string(OpKind k);
std::string format_rights(uint32_t rights);  // "read|write"

// "open" -> OpKind::Open ...
std::expected<OpKind, std::string> parse_op_kind(std::string_view s);
// Socket families and types by the rule-language names ("inet", "unix",
// "inet6", "netlink", "packet", ...; "stream", "dgram", "raw", "seqpacket").
std::expected<uint32_t, std::string> parse_family(std::string_view s);
std::expected<uint32_t, std::string> parse_sock_type(std::string_view s);

// "file:line:col section-text" for a rule id, or "the default" for BW_NO_RULE.
std::string describe_rule(const Bundle& bundle, uint32_t rule_id);

}  // namespace bulwark::policy
