#pragma once
// The API server: HTTP/1.1 and WebSocket (Boost.Beast) on a unix socket and,
// optionally, TCP on the loopback. All Beast code lives in http_server.cpp
// and http_parse.cpp.
//
// Who may call. Unix socket: the socket file has unix_mode (0660) and the
// caller's uid/gid from SO_PEERCRED must be in allowed_uids / allowed_gids
// (primary gid only: the kernel does not report supplementary groups), else
// 403. TCP: loopback addresses only; every request needs
// "Authorization: Bearer <token>" whose SHA-256 is one of token_sha256
// (compared in constant time), else 401; Host must name the loopback and
// Origin, if sent, too (DNS rebinding), else 403.
//
// Limits. Header, body and URI sizes; request smuggling forms are refused
// (http_parse.h); read_timeout covers the wait for a request and reading all
// of it (slowloris), write_timeout each write; max_connections in total.
// Requests on one connection are answered in order (pipelining).
#include <sys/types.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <expected>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/digest.h"

#include "api/http_api.h"
#include "api/http_parse.h"

namespace bulwark::http {

using TokenHash = Sha256;

struct ServerConfig {
    std::optional<std::string> unix_path;
    mode_t unix_mode = 0660;
    std::optional<gid_t> unix_group;  // chown the socket to this group
    std::vector<uid_t> allowed_uids;
    std::vector<gid_t> allowed_gids;
    std::optional<std::string> tcp_host;  // "127.0.0.1" or "::1" only
    uint16_t tcp_port = 7878;             // 0: any free port (tests)
    std::vector<TokenHash> token_sha256;
    HttpLimits limits;
    std::chrono::milliseconds read_timeout{10000};
    std::chrono::milliseconds write_timeout{10000};
    std::chrono::milliseconds stream_keepalive{15000};
    size_t max_connections = 512;
    int io_threads = 2;
    int worker_threads = 2;  // offloaded (database) handlers
    int run_threads = 64;    // long-running handlers (synchronous exec): concurrent runs served
};

std::optional<TokenHash> parse_token_hash(std::string_view hex);

class HttpServer {
public:
    static std::expected<std::unique_ptr<HttpServer>, std::string> start(ServerConfig cfg, const Router& router,
                                                                        Metrics* metrics);
    ~HttpServer();  // stops accepting, closes every connection, joins threads
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;
    uint16_t tcp_port() const;  // the bound port (after tcp_port = 0)
    size_t connections() const;

    struct Impl;

private:
    HttpServer() = default;
    std::unique_ptr<Impl> impl_;
};

}  // namespace bulwark::http
