#pragma once
// A QMP client over a connected stream socket (the VMM's `-qmp` chardev on a
// socket pair): the greeting, qmp_capabilities, then one command at a time;
// events are skipped. Descriptors go to qemu with SCM_RIGHTS (getfd).
#include <chrono>
#include <expected>
#include <string>

#include <nlohmann/json.hpp>

namespace bulwark::vm {

class Qmp {
public:
    explicit Qmp(int fd) : fd_(fd) {}
    // Reads the greeting and enters command mode.
    std::expected<void, std::string> handshake(std::chrono::milliseconds timeout);
    // The command's "return", or its error's description.
    std::expected<nlohmann::json, std::string> run(const std::string& command, const nlohmann::json& args,
                                                   std::chrono::milliseconds timeout);
    // Polls query-migrate until the migration (either way) completed, or
    // why not.
    std::expected<void, std::string> wait_migration(std::chrono::milliseconds timeout);
    // `getfd` with `fd` attached: qemu then knows it as `name`.
    std::expected<void, std::string> send_fd(const std::string& name, int fd, std::chrono::milliseconds timeout);

private:
    std::expected<nlohmann::json, std::string> next_reply(std::chrono::milliseconds timeout);
    int fd_;
    std::string buf_;
};

}  // namespace bulwark::vm
