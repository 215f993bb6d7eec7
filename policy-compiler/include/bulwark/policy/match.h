#pragma once
// Matching primitives shared by the reference evaluator, instantiate() and
// grants: operation paths, IP addresses in the v6 space (IPv4 as v4-mapped)
// and prefix containment. Rule-side parsing (normalise_path, path_covers,
// parse_cidr, format_cidr) is the compiler's, in values.h.
#include <array>
#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>

#include "bulwark/policy/values.h"

namespace bulwark::policy {

using Addr16 = std::array<uint8_t, 16>;

// The path an operation names, as the kernel would reach it: folds "//",
// "/./" and a trailing "/", and resolves ".." lexically (never above "/").
// The input must be absolute; the result is "/" or has no trailing slash.
// Fails with a reason for relative or empty paths and embedded NUL bytes.
// (Rule paths go through values.h normalise_path, which rejects "..".)
std::expected<std::string, std::string> resolve_operation_path(std::string_view path);

// Number of components ("/" -> 0, "/a/b" -> 2); the depth of a covering rule.
size_t path_depth(std::string_view normalised);

// "10.0.0.1" -> ::ffff:10.0.0.1, "2001:db8::1" -> itself.
std::optional<Addr16> parse_ip(std::string_view text);

// Addresses whose first `prefix` bits equal those of `net` (v6 space).
bool prefix_contains(const Addr16& net, uint8_t prefix, const Addr16& addr);

bool is_v4_mapped(const Addr16& addr);

// "::ffff:10.0.0.1" is printed "10.0.0.1"; other addresses in v6 form.
std::string format_addr(const Addr16& addr);

// Loopback: 127.0.0.0/8 (v4-mapped) and ::1.
bool is_loopback(const Addr16& addr);

}  // namespace bulwark::policy
