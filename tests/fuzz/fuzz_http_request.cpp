// libFuzzer target: one HTTP request as the API server would parse and check
// it (Beast parser with the server's limits, smuggling and size checks,
// query-string decoding, Host/Origin checks). Invariants, beyond "no crash,
// no sanitizer report": an accepted request consumed no more than the input,
// and a rejection is a real HTTP error status.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "api/http_parse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view in(reinterpret_cast<const char*>(data), size);
    bulwark::http::HttpLimits limits;
    limits.header_limit = 4096;  // small, so the fuzzer reaches the limits
    limits.body_limit = 8192;
    limits.uri_limit = 1024;
    auto out = bulwark::http::parse_request_bytes(in, limits);
    if (out.consumed > size) std::abort();
    if (out.status != 0 && out.status != 1 && (out.status < 400 || out.status > 599)) std::abort();

    // the helpers alone, on arbitrary bytes
    auto q = bulwark::http::parse_query(in);
    if (q)
        for (auto& [k, v] : *q)
            if (k.empty()) std::abort();
    (void)bulwark::http::percent_decode(in, true);
    bool h = bulwark::http::host_allowed(in, 7878);
    bool o = bulwark::http::origin_allowed(in, 7878);
    // whatever is allowed must name the loopback
    if (h && in.find("localhost") == std::string_view::npos && in.find("LOCALHOST") == std::string_view::npos &&
        in.find("127.0.0.1") == std::string_view::npos && in.find("[::1]") == std::string_view::npos) {
        // case-insensitive localhost spellings are fine; anything else is a bug
        bool any_local = false;
        for (size_t i = 0; i + 9 <= in.size(); ++i) {
            std::string_view w = in.substr(i, 9);
            bool m = true;
            for (size_t j = 0; j < 9; ++j) m &= (w[j] | 0x20) == "localhost"[j];
            any_local |= m;
        }
        if (!any_local) std::abort();
    }
    (void)o;
    return 0;
}
