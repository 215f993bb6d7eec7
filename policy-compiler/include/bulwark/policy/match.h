#pragma once
// Matching primitives shared by the reference evaluator, instantiate() and
// grants: path normalisation and coverage on whole components, IP address
// parsing into the v6 space (IPv4 as v4-mapped) and prefix containment.
// They define what "a rule covers X" means for every userspace consumer, and
// mirror what the BPF programs do on dentries and LPM keys.
#include <array>
#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>

#include "bulwark/policy/values.h"

namespace bulwark::policy {

using Addr16 = std::array<uint8_t, 16>;

// Path of a concrete operation: folds "//", "/./" and a trailing "/", and
// resolves ".." lexically (never above "/"), as the kernel's walk of the
// dentry's real ancestors would. Rule paths are validated by normalise_path()
// (values.h), which rejects "..". The input must be absolute; fails with a
// reason for relative or empty paths and for embedded NUL bytes.
std::expected<std::string, std::string> fold_path(std::string_view path);

// Number of components ("/" -> 0, "/a/b" -> 2); the depth of a covering rule.
size_t path_depth(std::string_view normalised);

// "10.0.0.1" -> ::ffff:10.0.0.1, "2001:db8::1" -> itself.
std::optional<Addr16> parse_ip(std::string_view text);

// Addresses whose first `prefix` bits equal those of `net` (v6 space).
bool prefix_contains(const Addr16& net, uint8_t prefix, const Addr16& addr);

bool is_v4_mapped(const Addr16& addr);

// "::ffff:10.0.0.0/104" is printed "10.0.0.0/8"; other prefixes in v6 form.
std::string format_addr(const Addr16& addr);

// Loopback: 127.0.0.0/8 (v4-mapped) and ::1.
bool is_loopback(const Addr16& addr);

}  // namespace bulwark::policy
