#include "telemetry/otlp_http.h"

#include <time.h>

#include <charconv>
#include <optional>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace bulwark::telemetry {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;

std::expected<OtlpEndpoint, std::string> parse_endpoint(std::string_view url) {
    OtlpEndpoint ep;
    ep.url = std::string(url);
    if (url.starts_with("https://"))
        return std::unexpected("'" + ep.url + "': https is not supported; export to a collector over http://");
    if (!url.starts_with("http://"))
        return std::unexpected("'" + ep.url + "' must be an http:// URL (http://host:port/v1/logs)");
    auto rest = url.substr(7);
    auto slash = rest.find('/');
    auto authority = rest.substr(0, slash);
    ep.target = slash == std::string_view::npos ? "/v1/logs" : std::string(rest.substr(slash));
    std::string_view port;
    if (authority.starts_with('[')) {
        auto close = authority.find(']');
        if (close == std::string_view::npos) return std::unexpected("'" + ep.url + "': unclosed '[' in the host");
        ep.host = std::string(authority.substr(1, close - 1));
        auto after = authority.substr(close + 1);
        if (!after.empty()) {
            if (after[0] != ':') return std::unexpected("'" + ep.url + "': ':' expected after ']'");
            port = after.substr(1);
            if (port.empty()) return std::unexpected("'" + ep.url + "': empty port");
        }
    } else {
        auto colon = authority.find(':');
        ep.host = std::string(authority.substr(0, colon));
        if (colon != std::string_view::npos) {
            port = authority.substr(colon + 1);
            if (port.empty()) return std::unexpected("'" + ep.url + "': empty port");
        }
    }
    if (ep.host.empty()) return std::unexpected("'" + ep.url + "': no host");
    for (char c : ep.host)
        if (static_cast<unsigned char>(c) <= ' ' || c == '@' || c == '/' || c == '?' || c == '#')
            return std::unexpected("'" + ep.url + "': the host may not contain '" + std::string(1, c) + "'");
    if (authority.find('@') != std::string_view::npos)
        return std::unexpected("'" + ep.url + "': credentials in the URL are not supported (use otlp.headers)");
    if (!port.empty()) {
        unsigned v = 0;
        auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), v);
        if (ec != std::errc() || p != port.data() + port.size() || v == 0 || v > 65535)
            return std::unexpected("'" + ep.url + "': bad port '" + std::string(port) + "'");
        ep.port = uint16_t(v);
    }
    for (char c : ep.target)
        if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f)
            return std::unexpected("'" + ep.url + "': the path may not contain spaces or control characters");
    return ep;
}

std::optional<std::chrono::seconds> parse_retry_after(std::string_view v, std::chrono::system_clock::time_point now) {
    while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
    while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
    if (v.empty()) return std::nullopt;
    uint64_t secs = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), secs);
    if (ec == std::errc() && p == v.data() + v.size()) return std::chrono::seconds(std::min<uint64_t>(secs, 86400));
    // IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT"
    std::string s(v);
    struct tm tm{};
    const char* end = strptime(s.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
    if (!end || *end) return std::nullopt;
    auto at = std::chrono::system_clock::from_time_t(timegm(&tm));
    auto d = std::chrono::duration_cast<std::chrono::seconds>(at - now);
    return std::chrono::seconds(std::clamp<int64_t>(d.count(), 0, 86400));
}

struct HttpPoster::Impl {
    OtlpEndpoint ep;
    std::vector<std::pair<std::string, std::string>> headers;
    std::string host_header;
    asio::io_context io;
    tcp::socket sock{io};
    tcp::resolver resolver{io};
    asio::steady_timer timer{io};
    beast::flat_buffer buf;
    bool open = false;

    void drop_connection() {
        beast::error_code ignored;
        sock.shutdown(tcp::socket::shutdown_both, ignored);
        sock.close(ignored);
        buf.clear();
        open = false;
    }

    // One request on the kept connection or a new one. `stale`: the kept
    // connection failed before any byte of an answer came (the peer had
    // closed it): worth one more try on a new connection.
    HttpAnswer exchange(bhttp::request<bhttp::span_body<const char>>& req, std::chrono::milliseconds timeout, bool& stale) {
        HttpAnswer ans;
        const bool reused = open;
        stale = false;
        bool timed_out = false, answered = false;
        bhttp::response_parser<bhttp::string_body> parser;
        parser.body_limit(4u << 20);
        parser.header_limit(64u << 10);

        auto fail = [&](const char* what, const beast::error_code& ec) {
            ans.error = timed_out ? std::string(what) + ": no answer within " + std::to_string(timeout.count()) + " ms"
                                  : std::string(what) + ": " + ec.message();
            if (reused && !timed_out && !parser.got_some()) stale = true;
            timer.cancel();
            drop_connection();
        };
        auto read = [&] {
            bhttp::async_read(sock, buf, parser, [&](const beast::error_code& ec, size_t) {
                if (ec) return fail("read", ec);
                answered = true;
                timer.cancel();
            });
        };
        auto write = [&] {
            bhttp::async_write(sock, req, [&, read](const beast::error_code& ec, size_t) {
                if (ec) return fail("write", ec);
                read();
            });
        };

        io.restart();
        timer.expires_after(timeout);
        timer.async_wait([&](const beast::error_code& ec) {
            if (ec) return;  // cancelled: the exchange ended first
            timed_out = true;
            resolver.cancel();
            beast::error_code ignored;
            sock.cancel(ignored);
            sock.close(ignored);
        });
        if (open) {
            write();
        } else {
            resolver.async_resolve(ep.host, std::to_string(ep.port),
                                   [&, write](const beast::error_code& ec, tcp::resolver::results_type results) {
                                       if (ec) return fail("resolve", ec);
                                       asio::async_connect(sock, results,
                                                           [&, write](const beast::error_code& ec2, const tcp::endpoint&) {
                                                               if (ec2) return fail("connect", ec2);
                                                               open = true;
                                                               write();
                                                           });
                                   });
        }
        io.run();
        if (!answered) {
            if (ans.error.empty()) ans.error = "no answer";
            if (open) drop_connection();
            return ans;
        }
        auto& res = parser.get();
        ans.status = static_cast<int>(res.result_int());
        ans.content_type = std::string(res[bhttp::field::content_type]);
        ans.body = std::move(res.body());
        if (ans.body.size() > (64u << 10)) ans.body.resize(64u << 10);
        if (res.count(bhttp::field::retry_after)) {
            auto v = res[bhttp::field::retry_after];
            ans.retry_after = parse_retry_after(std::string_view(v.data(), v.size()), std::chrono::system_clock::now());
        }
        if (!res.keep_alive()) drop_connection();
        return ans;
    }
};

HttpPoster::HttpPoster(OtlpEndpoint ep, std::vector<std::pair<std::string, std::string>> headers)
    : impl_(std::make_unique<Impl>()) {
    impl_->ep = std::move(ep);
    impl_->headers = std::move(headers);
    const bool v6 = impl_->ep.host.find(':') != std::string::npos;
    impl_->host_header = (v6 ? "[" + impl_->ep.host + "]" : impl_->ep.host) + ":" + std::to_string(impl_->ep.port);
}

HttpPoster::~HttpPoster() = default;

void HttpPoster::close() { impl_->drop_connection(); }

HttpAnswer HttpPoster::post(std::string_view ctype, const std::string& body, std::chrono::milliseconds timeout) {
    bhttp::request<bhttp::span_body<const char>> req(bhttp::verb::post, impl_->ep.target, 11);
    req.set(bhttp::field::host, impl_->host_header);
    req.set(bhttp::field::content_type, beast::string_view(ctype.data(), ctype.size()));
    req.set(bhttp::field::user_agent, "bulwark-agentd");
    for (const auto& [k, v] : impl_->headers) req.set(k, v);
    req.keep_alive(true);
    req.body() = beast::span<const char>(body.data(), body.size());  // no copy of the body
    req.prepare_payload();
    bool stale = false;
    auto ans = impl_->exchange(req, timeout, stale);
    if (stale) ans = impl_->exchange(req, timeout, stale);  // the kept connection had been closed
    return ans;
}

}  // namespace bulwark::telemetry
