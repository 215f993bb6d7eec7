#include "mcp/agentd_client.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace bulwark {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using nlohmann::json;

std::string AgentdReply::error_text() const {
    if (body.is_object() && body.contains("error") && body["error"].is_object()) {
        const auto& e = body["error"];
        std::string s = e.value("code", std::string("error")) + ": " + e.value("message", std::string());
        if (e.contains("reasons") && e["reasons"].is_array())
            for (const auto& r : e["reasons"])
                if (r.is_string()) s += "; " + r.get<std::string>();
        return s;
    }
    return "HTTP " + std::to_string(status) + ": " + raw;
}

std::expected<AgentdReply, AgentdError> AgentdClient::call(std::string_view method, std::string_view target,
                                                          const std::optional<json>& body) const {
    using K = AgentdError::Kind;
    const std::string what = std::string(method) + " " + std::string(target);
    bool sent = false;
    try {
        asio::io_context io;
        asio::local::stream_protocol::socket sock(io);
        beast::error_code ec;
        sock.connect(asio::local::stream_protocol::endpoint(socket_), ec);
        if (ec) return std::unexpected(AgentdError{K::Unavailable, "connect " + socket_ + ": " + ec.message()});

        bhttp::request<bhttp::string_body> req(bhttp::string_to_verb(beast::string_view(method.data(), method.size())),
                                             std::string(target), 11);
        req.set(bhttp::field::host, "agentd");
        req.set(bhttp::field::connection, "close");
        if (body) {
            req.set(bhttp::field::content_type, "application/json");
            req.body() = body->dump(-1, ' ', false, json::error_handler_t::replace);
        }
        req.prepare_payload();
        sent = true;  // from here on, some of it may have reached the daemon
        bhttp::write(sock, req, ec);
        if (ec) return std::unexpected(AgentdError{K::Lost, what + ": write: " + ec.message()});

        beast::flat_buffer buf;
        bhttp::response_parser<bhttp::string_body> parser;
        parser.body_limit(256ull << 20);
        bhttp::read(sock, buf, parser, ec);
        if (ec) return std::unexpected(AgentdError{K::Lost, what + ": the connection ended before the reply: " + ec.message()});
        AgentdReply r;
        r.status = static_cast<int>(parser.get().result_int());
        r.raw = std::move(parser.get().body());
        r.body = json::parse(r.raw, nullptr, false);
        if (r.body.is_discarded()) r.body = nullptr;
        return r;
    } catch (const std::exception& e) {
        return std::unexpected(AgentdError{sent ? K::Lost : K::Unavailable, what + ": " + e.what()});
    }
}

}  // namespace bulwark
