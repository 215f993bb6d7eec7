#pragma once
// A deliberately small HTTP/1.1 + WebSocket client over raw sockets, so the
// tests exercise the server with bytes they choose (smuggling forms, slow
// writers, pipelining) and share no parsing code with it.
#include <chrono>
#include <map>
#include <optional>
#include <string>

namespace bulwark::test {

int connect_unix(const std::string& path);  // -1 on failure (errno set)
int connect_tcp(uint16_t port);
bool send_all(int fd, const std::string& data);

struct Response {
    int status = 0;                             // 0: connection closed / timeout
    std::map<std::string, std::string> headers; // lower-case names
    std::string body;
};

// Reads one response (Content-Length bodies) from fd, keeping surplus bytes
// in `carry` for the next call (pipelining).
Response read_response(int fd, std::string& carry, std::chrono::milliseconds timeout);
Response request(int fd, const std::string& raw, std::chrono::milliseconds timeout = std::chrono::seconds(5));
// One GET on a fresh connection (unix if port == 0).
Response get(const std::string& unix_path, uint16_t port, const std::string& target,
             const std::string& extra_headers = "");
// true if the peer closed within timeout (read returns 0 or error)
bool closed_within(int fd, std::chrono::milliseconds timeout);
// Reads until `needle` has been seen or the timeout passes; returns all read.
std::string read_until(int fd, const std::string& needle, std::chrono::milliseconds timeout,
                       std::string* carry = nullptr);

// WebSocket: reads the next text frame payload (server frames are unmasked).
std::optional<std::string> ws_read_text(int fd, std::string& carry, std::chrono::milliseconds timeout);

}  // namespace bulwark::test
