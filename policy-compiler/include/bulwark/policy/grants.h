#pragma once
// Task grants: a task narrows a tool's instantiated bundle for one subtask
// ("write only /srv/t42", "connect only api.github.com:443", lower limits,
// an expiry). Attenuation only: apply_grant() either returns a bundle that
// allows nothing the tool's bundle does not, or refuses and lists every part
// of the grant that would widen it, naming the tool rule in the way.
//
// Scoping: a grant confines only what it names. `files` confines each right
// that appears in it (write, create, ...) to the grant's paths for that
// right; rights it does not name stay as the tool has them. `network`
// confines each operation it names (connect, bind, send) likewise.
#include <chrono>
#include <expected>
#include <optional>
#include <string>
#include <vector>

#include "bulwark/policy/bundle.h"
#include "bulwark/policy/instantiate.h"
#include "bulwark/policy/match.h"

namespace bulwark::policy {

struct FileGrant {
    std::string path;     // absolute; normalised by apply_grant
    uint32_t rights = 0;  // BW_FS_*
};

struct NetGrant {
    std::optional<std::string> host;  // resolved through the resolver
    Addr16 addr{};                    // CIDR when no host
    uint8_t prefix = 128;
    uint16_t port_lo = 0, port_hi = 65535;
    uint8_t proto_mask = BW_PROTO_TCP | BW_PROTO_UDP;
    uint8_t op_mask = BW_NET_CONNECT;
    bool operator==(const NetGrant&) const = default;
};

using Clock = std::chrono::system_clock;

struct Grant {
    std::string name;  // shown in explanations, e.g. "task t42"
    std::optional<std::vector<FileGrant>> files;
    bool network_none = false;                     // drop all network access
    std::optional<std::vector<NetGrant>> network;  // confine the operations named
    std::optional<uint64_t> families;              // socket families kept (subset)
    Limits limits;                                 // each one set must not exceed the tool's
    // microVM: a mode at least the tool's (off < preferred < required), and
    // memory and vCPUs at most the tool's.
    std::optional<MicroVmMode> microvm_mode;
    std::optional<uint64_t> microvm_memory_bytes;
    std::optional<uint32_t> microvm_vcpus;
    std::optional<Clock::time_point> expires_at;   // the task's run is cut at this time
    // Rights (BW_FS_*) and network operations (BW_NET_*) confined to what
    // `files` and `network` give even where no entry names them: one
    // confined with no entry is taken away.
    uint32_t files_confined = 0;
    uint8_t network_confined = 0;
};

struct GrantRefusal {
    std::vector<std::string> reasons;  // one per widening part, each naming the tool rule
};

struct NarrowedBundle {
    Bundle bundle;
    std::optional<Clock::time_point> expires_at;
};

// `parent` must be instantiated (is_instantiated). Grant rules get RuleRefs
// in the narrowed bundle with loc.file "grant:<name>" so decisions name them.
// With an expiry, the narrowed limits.timeout_ms is at most the time left.
std::expected<NarrowedBundle, GrantRefusal> apply_grant(const Bundle& parent, const Grant& grant,
                                                        Clock::time_point now,
                                                        const Resolver& resolve = {});

// The grant that narrows `current` to what it shares with `narrower`, both
// instantiated from the same tool's rules (`narrower` cut from them, as a
// profile's export is): each file right `narrower` confines is confined to
// the subtrees both give it on (of two nested paths, the deeper); each
// network operation to the addresses, ports and protocols both allow (a
// range that meets one of `current`'s denies is left out); the socket
// families to those of both. Unix socket rules stay `current`'s.
// apply_grant(current, it) refuses nothing but a table that overflows.
Grant intersection_grant(const Bundle& current, const Bundle& narrower, std::string name);

// The rights the bundle's rules give on a path (allows, plus what the bundle
// leaves unrestricted, minus denies).
uint32_t effective_file_rights(const Bundle& b, std::string_view normalised_path);

}  // namespace bulwark::policy
