#pragma once
// The Streamable HTTP transport of `agentd mcp --http` (MCP 2025-03-26 and
// later): one endpoint, /mcp, served by the API's own HTTP server (so the
// same loopback-only listener, bearer tokens compared in constant time,
// Host/Origin checks against DNS rebinding, and request limits apply).
//
//   POST /mcp    one JSON-RPC message; a request is answered with its JSON
//                response (200), a notification or response with 202.
//                `initialize` starts a session (a task) and returns its
//                Mcp-Session-Id; every other message must carry it (400
//                without, 404 for an unknown or ended one).
//   DELETE /mcp  ends the session named by Mcp-Session-Id (its task is
//                closed).
//   GET /mcp     405: this server sends no messages of its own.
//
// A session unused for `idle` ends as if deleted (checked on each request),
// so a client that vanishes does not hold its task open.
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "api/http_api.h"
#include "mcp/mcp_server.h"

namespace bulwark::mcp {

class HttpSessions {
public:
    using Factory = std::function<std::unique_ptr<Server>()>;
    explicit HttpSessions(Factory make, size_t max_sessions = 64,
                          std::chrono::milliseconds idle = std::chrono::minutes(30));

    void register_routes(http::Router& r);
    http::ApiResponse post(const http::ApiRequest& req);
    http::ApiResponse remove(const http::ApiRequest& req);
    // Closes every session's task (shutdown).
    void close_all();
    size_t size() const;

private:
    struct Session {
        std::shared_ptr<Server> server;
        std::chrono::steady_clock::time_point last_used;
    };
    void end_idle();

    Factory make_;
    size_t max_;
    std::chrono::milliseconds idle_;
    mutable std::mutex mu_;
    std::map<std::string, Session> sessions_;
};

}  // namespace bulwark::mcp
