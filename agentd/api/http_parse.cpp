#include "api/http_parse.h"

#include <boost/beast/http.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace bulwark::http {
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

namespace {

bool ieq(std::string_view a, std::string_view b) {
    return a.size() == b.size() &&
           std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return std::tolower((unsigned char)x) == std::tolower((unsigned char)y); });
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

// "host[:port]" where host is localhost, 127.0.0.1 or [::1]
bool loopback_authority(std::string_view a, uint16_t port) {
    std::string_view host = a, p;
    if (!a.empty() && a.front() == '[') {
        auto close = a.find(']');
        if (close == std::string_view::npos) return false;
        host = a.substr(0, close + 1);
        auto rest = a.substr(close + 1);
        if (!rest.empty()) {
            if (rest.front() != ':') return false;
            p = rest.substr(1);
        }
    } else if (auto c = a.rfind(':'); c != std::string_view::npos) {
        host = a.substr(0, c);
        p = a.substr(c + 1);
        if (p.empty()) return false;
    }
    if (!(ieq(host, "localhost") || host == "127.0.0.1" || host == "[::1]")) return false;
    if (!p.empty() || a.back() == ':') {
        unsigned v = 0;
        auto [ptr, ec] = std::from_chars(p.data(), p.data() + p.size(), v);
        if (ec != std::errc() || ptr != p.data() + p.size() || v != port) return false;
    }
    return true;
}

}  // namespace

std::optional<HttpError> check_request_header(const RawHeader& h, const HttpLimits& limits) {
    if (h.target.size() > limits.uri_limit)
        return HttpError{414, "uri_too_long",
                         "request target is " + std::to_string(h.target.size()) + " bytes; the limit is " +
                             std::to_string(limits.uri_limit)};
    if (h.target.empty() || h.target.front() != '/')
        return HttpError{400, "bad_target", "only origin-form request targets (\"/path?query\") are accepted"};
    if (h.fields.size() > limits.max_fields)
        return HttpError{431, "too_many_fields", "more than " + std::to_string(limits.max_fields) + " header fields"};
    size_t content_length = 0, transfer_encoding = 0, host = 0;
    for (auto& [name, value] : h.fields) {
        for (char c : value)
            if ((unsigned char)c < 0x20 && c != '\t')
                return HttpError{400, "bad_header", "control character in header field value"};
        if (ieq(name, "content-length")) {
            ++content_length;
            auto v = trim(value);
            if (v.empty() || !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }))
                return HttpError{400, "request_smuggling", "Content-Length must be one decimal number"};
        } else if (ieq(name, "transfer-encoding")) {
            ++transfer_encoding;
            if (!ieq(trim(value), "chunked"))
                return HttpError{400, "request_smuggling", "only \"Transfer-Encoding: chunked\" is accepted"};
        } else if (ieq(name, "host")) {
            ++host;
        }
    }
    if (content_length > 1)
        return HttpError{400, "request_smuggling", "Content-Length given more than once"};
    if (transfer_encoding > 1)
        return HttpError{400, "request_smuggling", "Transfer-Encoding given more than once"};
    if (content_length && transfer_encoding)
        return HttpError{400, "request_smuggling", "both Content-Length and Transfer-Encoding given"};
    if (transfer_encoding && h.version < 11)
        return HttpError{400, "request_smuggling", "Transfer-Encoding on an HTTP/1.0 request"};
    if (h.version >= 11 && host != 1)
        return HttpError{400, "bad_host", "HTTP/1.1 requests need exactly one Host field"};
    return std::nullopt;
}

HttpError parse_error(const boost::system::error_code& ec) {
    if (ec == bhttp::error::header_limit)
        return {431, "header_too_large", "request header exceeds the limit"};
    if (ec == bhttp::error::body_limit)
        return {413, "body_too_large", "request body exceeds the limit"};
    if (ec == bhttp::error::bad_content_length || ec == bhttp::error::bad_transfer_encoding)
        return {400, "request_smuggling", "conflicting or malformed message length (" + ec.message() + ")"};
    if (ec == bhttp::error::bad_chunk || ec == bhttp::error::bad_chunk_extension)
        return {400, "bad_chunk", "malformed chunk (" + ec.message() + ")"};
    if (ec == bhttp::error::bad_version)
        return {505, "bad_version", "only HTTP/1.0 and HTTP/1.1 are served"};
    return {400, "bad_request", "malformed request (" + ec.message() + ")"};
}

bool host_allowed(std::string_view host, uint16_t port) { return loopback_authority(trim(host), port); }

bool origin_allowed(std::string_view origin, uint16_t port) {
    origin = trim(origin);
    std::string_view rest;
    if (origin.starts_with("http://"))
        rest = origin.substr(7);
    else if (origin.starts_with("https://"))
        rest = origin.substr(8);
    else
        return false;
    if (rest.empty() || rest.find('/') != std::string_view::npos || rest.find('@') != std::string_view::npos)
        return false;
    return loopback_authority(rest, port);
}

std::optional<std::string> percent_decode(std::string_view s, bool plus_is_space) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
        char c = s[i];
        if (c == '%') {
            auto hex = [](char h) -> int {
                if (h >= '0' && h <= '9') return h - '0';
                if (h >= 'a' && h <= 'f') return h - 'a' + 10;
                if (h >= 'A' && h <= 'F') return h - 'A' + 10;
                return -1;
            };
            if (i + 2 >= s.size()) return std::nullopt;
            int a = hex(s[i + 1]), b = hex(s[i + 2]);
            if (a < 0 || b < 0) return std::nullopt;
            char d = char(a * 16 + b);
            if (d == '\0') return std::nullopt;
            out.push_back(d);
            i += 2;
        } else if (c == '+' && plus_is_space) {
            out.push_back(' ');
        } else {
            out.push_back(c);
        }
    }
    return out;
}

std::optional<std::map<std::string, std::string>> parse_query(std::string_view q) {
    std::map<std::string, std::string> out;
    while (!q.empty()) {
        auto amp = q.find('&');
        auto part = q.substr(0, amp);
        q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
        if (part.empty()) continue;
        auto eq = part.find('=');
        auto k = percent_decode(part.substr(0, eq), true);
        auto v = percent_decode(eq == std::string_view::npos ? std::string_view() : part.substr(eq + 1), true);
        if (!k || !v || k->empty()) return std::nullopt;
        if (!out.emplace(std::move(*k), std::move(*v)).second) return std::nullopt;
    }
    return out;
}

ParseOutcome parse_request_bytes(std::string_view bytes, const HttpLimits& limits) {
    bhttp::request_parser<bhttp::string_body> p;
    p.header_limit(std::uint32_t(std::min<size_t>(limits.header_limit, UINT32_MAX)));
    p.body_limit(limits.body_limit);
    p.eager(false);
    boost::system::error_code ec;
    size_t used = 0;
    auto feed = [&](bool until_header) {
        while (used < bytes.size() && !(until_header ? p.is_header_done() : p.is_done())) {
            auto n = p.put(boost::asio::buffer(bytes.data() + used, bytes.size() - used), ec);
            if (ec == bhttp::error::need_more) {
                ec = {};
                return false;
            }
            if (ec) return false;
            used += n;
            if (n == 0) return false;
        }
        return true;
    };
    feed(true);
    if (ec) {
        auto e = parse_error(ec);
        return {e.status, e.code, used};
    }
    if (!p.is_header_done()) return {1, "need_more", used};
    const auto& req = p.get();
    RawHeader h = raw_header_of(req);
    if (auto e = check_request_header(h, limits)) return {e->status, e->code, used};
    auto qpos = h.target.find('?');
    if (qpos != std::string_view::npos && !parse_query(h.target.substr(qpos + 1)))
        return {400, "bad_query", used};
    if (auto host = req.find(bhttp::field::host); host != req.end())
        (void)host_allowed(std::string_view(host->value().data(), host->value().size()), 7878);
    if (auto o = req.find(bhttp::field::origin); o != req.end())
        (void)origin_allowed(std::string_view(o->value().data(), o->value().size()), 7878);
    feed(false);
    if (ec) {
        auto e = parse_error(ec);
        return {e.status, e.code, used};
    }
    if (!p.is_done()) return {1, "need_more", used};
    return {0, "", used};
}

}  // namespace bulwark::http
