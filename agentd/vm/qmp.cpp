#include "vm/qmp.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "vm/channel.h"

namespace bulwark::vm {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

std::expected<json, std::string> Qmp::next_reply(std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
        if (auto nl = buf_.find('\n'); nl != std::string::npos) {
            auto j = json::parse(buf_.substr(0, nl), nullptr, false);
            buf_.erase(0, nl + 1);
            if (j.is_discarded() || !j.is_object()) return std::unexpected("QMP: a line that is not a JSON object");
            if (j.contains("event")) continue;
            return j;
        }
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0) return std::unexpected("QMP: no reply in time");
        pollfd p{fd_, POLLIN, 0};
        int rc = ::poll(&p, 1, int(left));
        if (rc < 0 && errno != EINTR) return std::unexpected(std::string("QMP: poll: ") + std::strerror(errno));
        if (rc <= 0) continue;
        char b[4096];
        ssize_t n = ::read(fd_, b, sizeof b);
        if (n <= 0) return std::unexpected("QMP: the VMM closed its monitor");
        buf_.append(b, size_t(n));
        if (buf_.size() > (1u << 20)) return std::unexpected("QMP: reply over 1 MiB");
    }
}

std::expected<void, std::string> Qmp::handshake(std::chrono::milliseconds timeout) {
    auto g = next_reply(timeout);
    if (!g) return std::unexpected(g.error());
    if (!g->contains("QMP")) return std::unexpected("QMP: no greeting");
    auto c = run("qmp_capabilities", json::object(), timeout);
    if (!c) return std::unexpected(c.error());
    return {};
}

std::expected<json, std::string> Qmp::run(const std::string& command, const json& args,
                                          std::chrono::milliseconds timeout) {
    json req = {{"execute", command}};
    if (!args.empty()) req["arguments"] = args;
    if (!write_all(fd_, req.dump() + "\n")) return std::unexpected(std::string("QMP: write: ") + std::strerror(errno));
    auto r = next_reply(timeout);
    if (!r) return r;
    if (r->contains("error"))
        return std::unexpected("QMP " + command + ": " + (*r)["error"].value("desc", std::string("error")));
    return r->value("return", json::object());
}

std::expected<void, std::string> Qmp::wait_migration(std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
        auto st = run("query-migrate", json::object(), std::chrono::seconds(5));
        if (!st) return std::unexpected(st.error());
        std::string status = st->value("status", "");
        if (status == "completed") return {};
        if (status == "failed" || status == "cancelled") return std::unexpected("migration " + status);
        if (Clock::now() > deadline) return std::unexpected("migration still " + status + " at the deadline");
        ::usleep(5000);
    }
}

std::expected<void, std::string> Qmp::send_fd(const std::string& name, int fd, std::chrono::milliseconds timeout) {
    std::string line = json{{"execute", "getfd"}, {"arguments", {{"fdname", name}}}}.dump() + "\n";
    iovec iov{line.data(), line.size()};
    alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl;
    msg.msg_controllen = sizeof ctl;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
    if (::sendmsg(fd_, &msg, MSG_NOSIGNAL) != ssize_t(line.size()))
        return std::unexpected(std::string("QMP getfd: sendmsg: ") + std::strerror(errno));
    auto r = next_reply(timeout);
    if (!r) return std::unexpected(r.error());
    if (r->contains("error")) return std::unexpected("QMP getfd: " + (*r)["error"].value("desc", std::string("error")));
    return {};
}

}  // namespace bulwark::vm
