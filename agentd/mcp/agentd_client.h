#pragma once
// A client of a running agentd over its unix socket (Boost.Beast): one
// HTTP/1.1 request per connection, JSON in and out. Thread-safe (no shared
// connection), so concurrent calls run side by side.
#include <chrono>
#include <expected>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace bulwark {

struct AgentdReply {
    int status = 0;
    nlohmann::json body;  // null when the body is not JSON
    std::string raw;
    // The API's error text ("<code>: <message>"), or the raw body.
    std::string error_text() const;
};

// A transport failure. Unavailable: no daemon accepted the connection, so
// nothing was sent (safe to send again). Lost: the connection ended after
// the request was sent and before the whole reply came (the daemon may have
// acted on it).
struct AgentdError {
    enum class Kind { Unavailable, Lost } kind = Kind::Unavailable;
    std::string message;
};

class AgentdClient {
public:
    explicit AgentdClient(std::string socket_path) : socket_(std::move(socket_path)) {}

    // A transport failure is the error; any HTTP status is a reply.
    std::expected<AgentdReply, AgentdError> call(std::string_view method, std::string_view target,
                                                const std::optional<nlohmann::json>& body = std::nullopt) const;

    const std::string& socket_path() const { return socket_; }

private:
    std::string socket_;
};

}  // namespace bulwark
