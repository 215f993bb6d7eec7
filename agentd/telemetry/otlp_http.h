#pragma once
// The OTLP/HTTP client: POSTs request bodies to one endpoint over TCP
// (Boost.Beast), keeping the connection open between requests, with a
// deadline on each (connect, write and read together). No TLS: the
// endpoint is a collector reached over plain HTTP (a node-local OpenTelemetry
// Collector, typically), https:// is refused when the URL is read.
//
// One thread uses a poster at a time (the exporter's).
#include <chrono>
#include <cstdint>
#include <expected>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bulwark::telemetry {

// http://host[:port][/path]; the path defaults to /v1/logs (the OTLP/HTTP
// logs path), the port to 80.
struct OtlpEndpoint {
    std::string url;     // as configured
    std::string host;    // a name or an address (IPv6 without brackets)
    uint16_t port = 80;
    std::string target;  // /v1/logs
};
std::expected<OtlpEndpoint, std::string> parse_endpoint(std::string_view url);

struct HttpAnswer {
    int status = 0;                // 0: no answer (error says why)
    std::string error;             // connect, write or read failure, timeout
    std::string content_type;
    std::string body;              // at most 64 KiB kept
    std::optional<std::chrono::seconds> retry_after;
};

// Retry-After: delta-seconds or an HTTP-date (now: the wall clock).
std::optional<std::chrono::seconds> parse_retry_after(std::string_view v,
                                                      std::chrono::system_clock::time_point now);

class HttpPoster {
public:
    HttpPoster(OtlpEndpoint ep, std::vector<std::pair<std::string, std::string>> headers);
    ~HttpPoster();
    HttpPoster(const HttpPoster&) = delete;
    HttpPoster& operator=(const HttpPoster&) = delete;

    // One POST of `body`. A connection kept from an earlier request that the
    // peer closed meanwhile is replaced once without counting as a failure.
    HttpAnswer post(std::string_view content_type, const std::string& body, std::chrono::milliseconds timeout);
    void close();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace bulwark::telemetry
