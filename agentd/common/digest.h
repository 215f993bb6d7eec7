#pragma once
// SHA-256, hex and random tokens: one implementation for the daemon's
// tokens, session ids and file digests.
#include <array>
#include <cstddef>
#include <cstdint>
#include <expected>
#include <string>
#include <string_view>

#include "common/sys_error.h"

namespace bulwark {

using Sha256 = std::array<uint8_t, 32>;

Sha256 sha256(std::string_view data);
// Lowercase hex.
std::string to_hex(const uint8_t* p, size_t n);
inline std::string to_hex(const Sha256& h) { return to_hex(h.data(), h.size()); }
// `bytes` bytes of the kernel's random generator (getrandom), as hex.
std::expected<std::string, SysError> random_hex(size_t bytes);

}  // namespace bulwark
