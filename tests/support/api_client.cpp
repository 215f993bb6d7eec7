#include "api_client.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <cstring>

namespace bulwark::test {
using Clock = std::chrono::steady_clock;

int connect_unix(const std::string& path) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

int connect_tcp(uint16_t port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

bool send_all(int fd, const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
        ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
        if (n <= 0) return false;
        off += size_t(n);
    }
    return true;
}

namespace {
// read more into buf; false on close/timeout
bool read_more(int fd, std::string& buf, Clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, int(left)) <= 0) return false;
    char tmp[65536];
    ssize_t n = recv(fd, tmp, sizeof tmp, 0);
    if (n <= 0) return false;
    buf.append(tmp, size_t(n));
    return true;
}
}  // namespace

Response read_response(int fd, std::string& carry, std::chrono::milliseconds timeout) {
    auto deadline = Clock::now() + timeout;
    Response r;
    size_t hdr_end;
    while ((hdr_end = carry.find("\r\n\r\n")) == std::string::npos)
        if (!read_more(fd, carry, deadline)) return r;
    std::string head = carry.substr(0, hdr_end);
    carry.erase(0, hdr_end + 4);
    auto sp = head.find(' ');
    r.status = std::atoi(head.c_str() + sp + 1);
    size_t pos = head.find("\r\n");
    while (pos != std::string::npos) {
        size_t next = head.find("\r\n", pos + 2);
        std::string line = head.substr(pos + 2, next == std::string::npos ? std::string::npos : next - pos - 2);
        auto c = line.find(':');
        if (c != std::string::npos) {
            std::string k = line.substr(0, c);
            for (auto& ch : k) ch = char(std::tolower((unsigned char)ch));
            std::string v = line.substr(c + 1);
            while (!v.empty() && v.front() == ' ') v.erase(0, 1);
            r.headers[k] = v;
        }
        pos = next;
    }
    size_t len = r.headers.count("content-length") ? std::stoul(r.headers["content-length"]) : 0;
    while (carry.size() < len)
        if (!read_more(fd, carry, deadline)) break;
    r.body = carry.substr(0, len);
    carry.erase(0, std::min(len, carry.size()));
    return r;
}

Response request(int fd, const std::string& raw, std::chrono::milliseconds timeout) {
    std::string carry;
    if (!send_all(fd, raw)) return {};
    return read_response(fd, carry, timeout);
}

Response get(const std::string& unix_path, uint16_t port, const std::string& target,
             const std::string& extra_headers) {
    int fd = port ? connect_tcp(port) : connect_unix(unix_path);
    if (fd < 0) return {};
    std::string host = port ? "127.0.0.1:" + std::to_string(port) : "localhost";
    auto r = request(fd, "GET " + target + " HTTP/1.1\r\nHost: " + host + "\r\n" + extra_headers + "\r\n");
    close(fd);
    return r;
}

bool closed_within(int fd, std::chrono::milliseconds timeout) {
    auto deadline = Clock::now() + timeout;
    for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0) return false;
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, int(left)) <= 0) return false;
        char tmp[4096];
        ssize_t n = recv(fd, tmp, sizeof tmp, 0);
        if (n <= 0) return true;
    }
}

std::string read_until(int fd, const std::string& needle, std::chrono::milliseconds timeout, std::string* carry) {
    std::string local;
    std::string& buf = carry ? *carry : local;
    auto deadline = Clock::now() + timeout;
    while (buf.find(needle) == std::string::npos)
        if (!read_more(fd, buf, deadline)) break;
    return buf;
}

std::optional<std::string> ws_read_text(int fd, std::string& carry, std::chrono::milliseconds timeout) {
    auto deadline = Clock::now() + timeout;
    for (;;) {
        while (carry.size() < 2)
            if (!read_more(fd, carry, deadline)) return std::nullopt;
        uint8_t b0 = uint8_t(carry[0]), b1 = uint8_t(carry[1]);
        uint64_t len = b1 & 0x7f;
        size_t hdr = 2;
        if (len == 126) hdr = 4;
        if (len == 127) hdr = 10;
        while (carry.size() < hdr)
            if (!read_more(fd, carry, deadline)) return std::nullopt;
        if (len == 126) len = (uint64_t(uint8_t(carry[2])) << 8) | uint8_t(carry[3]);
        if (len == 127) {
            len = 0;
            for (int i = 0; i < 8; ++i) len = (len << 8) | uint8_t(carry[size_t(2 + i)]);
        }
        if (b1 & 0x80) return std::nullopt;  // servers never mask
        while (carry.size() < hdr + len)
            if (!read_more(fd, carry, deadline)) return std::nullopt;
        std::string payload = carry.substr(hdr, len);
        carry.erase(0, hdr + len);
        int opcode = b0 & 0x0f;
        if (opcode == 1) return payload;
        if (opcode == 8) return std::nullopt;  // close
        // ping/pong/continuation: skip
    }
}

}  // namespace bulwark::test
