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

namespace bulwark::policy {

using Addr16 = std::array<uint8_t, 16>;

// Folds "//", "/./" and a trailing "/", and resolves ".." lexically (never
// above "/"). The input must be absolute; the result is "/" or has no
// trailing slash. Fails with a reason for relative or empty paths and for
// embedded NUL bytes.
std::expected<std::string, std::string> normalise_path(std::string_view path);

// True when the rule path `rule` covers `path` (both normalised): equal, or
// `path` lies below it on a component boundary ("/a/b" covers "/a/b/c", not
// "/a/bc"). "/" covers everything.
bool path_covers(std::string_view rule, std::string_view path);

// Number of components ("/" -> 0, "/a/b" -> 2); the depth of a covering rule.
size_t path_depth(std::string_view normalised);

// "10.0.0.1" -> ::ffff:10.0.0.1, "2001:db8::1" -> itself.
std::optional<Addr16> parse_ip(std::string_view text);

// "10.0.0.0/8" -> (::ffff:10.0.0.0, 104); a bare address is a /32 or /128.
// Host bits below the prefix must be zero.
std::expected<std::pair<Addr16, uint8_t>, std::string> parse_cidr(std::string_view text);

// Addresses whose first `prefix` bits equal those of `net` (v6 space).
bool prefix_contains(const Addr16& net, uint8_t prefix, const Addr16& addr);

bool is_v4_mapped(const Addr16& addr);

// "::ffff:10.0.0.0/104" is printed "10.0.0.0/8"; other prefixes in v6 form.
std::string format_addr(const Addr16& addr);
std::string format_cidr(const Addr16& addr, uint8_t prefix);

// Loopback: 127.0.0.0/8 (v4-mapped) and ::1.
bool is_loopback(const Addr16& addr);

}  // namespace bulwark::policy
