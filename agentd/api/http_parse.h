#pragma once
// Request-level rules of the API server that do not need a socket: limits,
// request-smuggling checks, Host/Origin checks, query strings. The server
// (http_server.cpp) and the fuzz target (tests/fuzz/fuzz_http_request.cpp)
// share this code, so what is fuzzed is what is served. No Beast types here.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace boost::system {
class error_code;
}

namespace bulwark::http {

struct HttpLimits {
    size_t header_limit = 16 * 1024;  // request line + all fields
    size_t body_limit = 1024 * 1024;
    size_t uri_limit = 8 * 1024;
    size_t max_fields = 100;
};

struct HttpError {
    int status = 400;
    std::string code;     // machine-readable, e.g. "request_smuggling"
    std::string message;  // one sentence for people
};

struct RawHeader {
    std::string_view method;
    std::string_view target;
    unsigned version = 11;  // 10 or 11
    std::vector<std::pair<std::string_view, std::string_view>> fields;  // as received
};

// The RawHeader view of a parsed Beast request header (views into `req`).
// A template so this header needs no Beast include.
template <class Request>
RawHeader raw_header_of(const Request& req) {
    RawHeader h;
    h.method = std::string_view(req.method_string().data(), req.method_string().size());
    h.target = std::string_view(req.target().data(), req.target().size());
    h.version = req.version();
    for (const auto& f : req)
        h.fields.emplace_back(std::string_view(f.name_string().data(), f.name_string().size()),
                              std::string_view(f.value().data(), f.value().size()));
    return h;
}

// Checks after the parser accepted the header; nullopt = acceptable.
// Rejects: both Content-Length and Transfer-Encoding, repeated or
// comma-listed Content-Length, any Transfer-Encoding but exactly "chunked"
// (and any at all on HTTP/1.0), URIs over the limit or not origin-form, too
// many fields, control characters in field values, a missing Host on 1.1.
std::optional<HttpError> check_request_header(const RawHeader& h, const HttpLimits& limits);

// Maps a parser error (boost::beast::http::error or asio) to a response.
HttpError parse_error(const boost::system::error_code& ec);

// DNS-rebinding defence for the TCP listener: Host must name the loopback
// (localhost, 127.0.0.1, [::1]) with no port or the listener's port; Origin,
// when present, must be http(s) on such a host.
bool host_allowed(std::string_view host, uint16_t port);
bool origin_allowed(std::string_view origin, uint16_t port);

std::optional<std::string> percent_decode(std::string_view s, bool plus_is_space);
// "a=1&b=x%20y" -> {a:1, b:"x y"}; nullopt on bad escapes or repeated keys.
std::optional<std::map<std::string, std::string>> parse_query(std::string_view q);

// Parses one request from raw bytes with the server's parser settings and
// checks (the fuzz entry point). status 0 = accepted (consumed = its size),
// 1 = need more bytes, else the HTTP error the server would answer.
struct ParseOutcome {
    int status = 0;
    std::string code;
    size_t consumed = 0;
};
ParseOutcome parse_request_bytes(std::string_view bytes, const HttpLimits& limits);

}  // namespace bulwark::http
