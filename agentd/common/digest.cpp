#include "common/digest.h"

#include <openssl/evp.h>
#include <sys/random.h>

#include <cerrno>
#include <vector>

namespace bulwark {

Sha256 sha256(std::string_view data) {
    Sha256 out{};
    unsigned len = 0;
    EVP_Digest(data.data(), data.size(), out.data(), &len, EVP_sha256(), nullptr);
    return out;
}

std::string to_hex(const uint8_t* p, size_t n) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string s;
    s.reserve(2 * n);
    for (size_t i = 0; i < n; ++i) {
        s.push_back(digits[p[i] >> 4]);
        s.push_back(digits[p[i] & 15]);
    }
    return s;
}

std::expected<std::string, SysError> random_hex(size_t bytes) {
    std::vector<uint8_t> raw(bytes);
    size_t got = 0;
    while (got < bytes) {
        ssize_t n = ::getrandom(raw.data() + got, bytes - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return std::unexpected(SysError::last("getrandom"));
        got += static_cast<size_t>(n);
    }
    return to_hex(raw.data(), raw.size());
}

}  // namespace bulwark
