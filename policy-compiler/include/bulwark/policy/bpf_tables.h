#pragma once
// BpfTables from a bundle's rules: the exact map contents the BPF programs
// read (bulwark_abi.h). instantiate() and grants rebuild them after changing
// paths or network rules; the reference evaluator's table path reads them.
//
// The compiler's emit-bpf pass builds its tables with these same functions,
// so a compiled bundle and a rebuilt one cannot drift apart (the table
// contract is documented in bulwark_abi.h).
#include <expected>
#include <string>
#include <string_view>
#include <vector>

#include "bulwark/policy/bundle.h"

namespace bulwark::policy {

// The rights a bundle leaves unrestricted: once any `files:` rule exists
// nothing is (0); with only an `exec:` allow-list everything but exec is;
// with neither, everything is (BW_FS_ALL). A rule belongs to `exec:` when its
// RuleRef section is "exec"; any other (or unknown) rule counts as `files:`.
uint32_t unrestricted_file_rights(const Bundle& b);

// BW_POL_FILES_ENFORCED / BW_POL_EXEC_ENFORCED for the bundle's file rules.
uint32_t file_policy_flags(const Bundle& b);

// bw_policy for the bundle: mode, file and network flags, socket masks.
// Flags set from outside the rules are kept from b.bpf.header: DENY_PTRACE/
// MOUNT/BPF (from the seccomp allow-list) and FILES/EXEC_ENFORCED (a present
// `files:` or `exec:` section enforces even when no rule is left in it, so
// rebuilding never drops enforcement); rules add FILES/EXEC_ENFORCED. version
// stays 0 (filled by the loader).
bw_policy build_policy_header(const Bundle& b);

// One entry per distinct path, in first-appearance order: allow and deny are
// the unions of the rules on that exact path; allow_rule_id / deny_rule_id is
// the first rule (source order) contributing allow / deny bits, BW_NO_RULE
// when there is none. Paths must already be instantiated. Entries beyond
// BW_MAX_FILE_RULES are the caller's to refuse (check_file_capacity).
std::vector<BpfFileEntry> build_file_entries(const std::vector<FileRule>& files);

// Why a set of tables cannot be loaded: a diagnostic code, the message, the
// rule to point at (BW_NO_RULE when the policy as a whole is at fault) and
// the distinct rules that contributed to the entry that does not fit.
struct TableError {
    std::string code;  // too-many-file-rules, too-many-net-rules, too-many-port-ranges, unresolved-host, bad-prefix
    std::string message;
    uint32_t at_rule = BW_NO_RULE;
    std::vector<uint32_t> rule_ids;
};

// Refuses more file entries than the kernel map holds.
std::expected<void, TableError> check_file_capacity(const std::vector<BpfFileEntry>& entries);

// The network rules the kernel sees in NetMode::Rules: the bundle's rules
// plus one allow rule per `dns:` resolver (connect+send, tcp+udp, port 53)
// unless an identical rule is already present.
std::vector<NetRule> effective_net_rules(const Bundle& b);

// Order of ranges inside an LPM entry: deny before allow, then by lo, hi, protocols, operations;
// a stable sort of the containing prefixes' ranges, least specific first.
// The kernel takes the first matching deny, else the first matching allow,
// so this order also fixes which rule a decision is attributed to.
bool range_before(const bw_port_range& a, const bw_port_range& b);
// Identical ranges (rule id aside) are kept once, the first.
bool same_range(const bw_port_range& a, const bw_port_range& b);

// LPM entries: one per distinct
// prefix, ordered by prefix length then address; each carries the ranges of
// every prefix containing it (itself included), sorted by range_before and
// deduplicated, so the longest match alone decides. Fails when a rule still
// names a host, there are more than BW_MAX_NET_RULES prefixes or an entry
// needs more than BW_PORT_RANGES_MAX ranges (nothing is truncated).
std::expected<std::vector<BpfNetEntry>, TableError> build_net_entries(const std::vector<NetRule>& rules);

// The bw_unix_rules key of one unix address (layout in bulwark_abi.h):
// "@name" an abstract name, "/path" one pathname socket, "/dir/" (trailing
// slash) every pathname socket below that directory. policy_id stays 0 (the
// loader fills it). Fails on a relative path or a name longer than sun_path
// holds (108 bytes for a path, 107 for an abstract name).
std::expected<bw_unix_key, std::string> unix_rule_key(const std::string& address);

// Why a unix rule's path cannot be held to the socket it names under b's file
// rules, or "" when it can: the tool may create or remove at the path or at
// one of its directories (it could put another socket, or a symlink to one,
// under the allowed name), or its file rights are unrestricted. Abstract
// names always can. Paths rooted at different variables are unrelated, so
// callers check again once the bundle is instantiated.
std::string unix_rule_unsound(const Bundle& b, const std::string& address);

// Why a pathname bind rule names a place the tool may not create a file in
// (a bind makes the socket file): "" when it may, for abstract names, under
// the sandbox's private /tmp, and when the file rights are unrestricted.
std::string unix_bind_uncreatable(const Bundle& b, const std::string& address);

// A pathname below the sandbox's private /tmp ("/tmp/..." or "${tmp}/..."),
// a tmpfs of the sandbox's own: the tool may bind there with no rule (the
// socket is out of the host's reach), as the BPF LSM's socket_bind lets it.
bool unix_bind_in_private_tmp(std::string_view address);

// unix_rule_unsound for connect/send rules, unix_bind_uncreatable for bind
// rules, as one sentence; "" when the rule is sound.
std::string unix_rule_check(const Bundle& b, const UnixRule& r);

// bw_unix_rules entries of instantiated unix rules: one per distinct address,
// its ops the union of every rule naming it or a directory above it ("/dir/"),
// each op's rule id the most specific rule granting it (first in source order
// among equals). Fails on an address unix_rule_key refuses, or more entries
// than the map holds.
std::expected<std::vector<BpfUnixEntry>, TableError> build_unix_entries(const std::vector<UnixRule>& rules);

// Rebuilds b.bpf (header, files, net, unix) from b's rules.
std::expected<void, std::string> rebuild_bpf_tables(Bundle& b);

}  // namespace bulwark::policy
