#include "vm/channel.h"

#include <unistd.h>

#include <cerrno>

namespace bulwark::vm {

bool from_guest(FrameType t) {
    switch (t) {
        case FrameType::Hello:
        case FrameType::Stdout:
        case FrameType::Stderr:
        case FrameType::Exit:
        case FrameType::Record:
        case FrameType::Log:
        case FrameType::PolicyApplied: return true;
        default: return false;
    }
}

bool from_host(FrameType t) {
    switch (t) {
        case FrameType::Start:
        case FrameType::Stdin:
        case FrameType::StdinEof:
        case FrameType::Cancel:
        case FrameType::Ack:
        case FrameType::Policy: return true;
        default: return false;
    }
}

std::string_view frame_name(FrameType t) {
    switch (t) {
        case FrameType::Hello: return "hello";
        case FrameType::Start: return "start";
        case FrameType::Stdin: return "stdin";
        case FrameType::StdinEof: return "stdin-eof";
        case FrameType::Stdout: return "stdout";
        case FrameType::Stderr: return "stderr";
        case FrameType::Exit: return "exit";
        case FrameType::Cancel: return "cancel";
        case FrameType::Record: return "record";
        case FrameType::Ack: return "ack";
        case FrameType::Log: return "log";
        case FrameType::Policy: return "policy";
        case FrameType::PolicyApplied: return "policy-applied";
    }
    return "?";
}

std::string encode(FrameType type, std::string_view payload) {
    uint32_t len = static_cast<uint32_t>(payload.size() + 1);
    std::string out;
    out.reserve(4 + len);
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
    out.push_back(static_cast<char>(type));
    out.append(payload);
    return out;
}

std::expected<std::optional<Frame>, std::string> FrameReader::next() {
    if (!error_.empty()) return std::unexpected(error_);
    if (buffered() < 4) return std::optional<Frame>();
    const auto* p = reinterpret_cast<const unsigned char*>(buf_.data() + off_);
    uint32_t len = uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
    if (len == 0 || len > kMaxFrame + 1) {
        error_ = "frame of " + std::to_string(len) + " bytes (1 to " + std::to_string(kMaxFrame + 1) + " allowed)";
        return std::unexpected(error_);
    }
    if (buffered() < 4 + size_t(len)) return std::optional<Frame>();
    auto type = static_cast<FrameType>(p[4]);
    if (!accept_(type)) {
        error_ = "frame type " + std::to_string(unsigned(p[4])) +
                 (frame_name(type) == "?" ? " is unknown" : " (" + std::string(frame_name(type)) + ") is not accepted from this end");
        return std::unexpected(error_);
    }
    Frame f{type, buf_.substr(off_ + 5, len - 1)};
    off_ += 4 + size_t(len);
    // Drop consumed bytes once they dominate the buffer.
    if (off_ > 65536 && off_ * 2 > buf_.size()) {
        buf_.erase(0, off_);
        off_ = 0;
    }
    return std::optional<Frame>(std::move(f));
}

bool write_all(int fd, std::string_view bytes) {
    while (!bytes.empty()) {
        ssize_t n = ::write(fd, bytes.data(), bytes.size());
        if (n < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        bytes.remove_prefix(size_t(n));
    }
    return true;
}

}  // namespace bulwark::vm
