#pragma once
// The microVM channel: length-prefixed frames between agentd and the guest
// agent over one byte stream (a virtio-serial port here, vsock where the
// host has it). Both ends compile this file.
//
//   frame = u32 length (little endian, of what follows) | u8 type | payload
//
// guest -> host: Hello (JSON: kernel, lsm, landlock ABI, agent digest),
//   Stdout, Stderr (bytes), Record (JSON: one decision of the guest's
//   layers), Exit (JSON: the guest's run report), Log (text: the agent's own
//   diagnostics), PolicyApplied (JSON: policy_version, applied, detail: the
//   answer to a Policy frame).
// host -> guest: Start (JSON: bundle, argv, workdir, ids, environment),
//   Stdin (bytes), StdinEof, Cancel, Ack (of Exit: the guest powers off;
//   with the payload kAckPark it waits for the next Start instead: a task's
//   VM kept warm across its runs), Policy (JSON: bundle, policy_version: a
//   task's new policy epoch for the running tool, bound in the guest as on
//   the host: its BPF binding follows; seccomp and Landlock stay as launched).
// A frame longer than kMaxFrame, of an unknown type, or sent the wrong way
// is a protocol error: the reader stops and the VM is torn down.
#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>

namespace bulwark::vm {

enum class FrameType : uint8_t {
    Hello = 1,
    Start = 2,
    Stdin = 3,
    StdinEof = 4,
    Stdout = 5,
    Stderr = 6,
    Exit = 7,
    Cancel = 8,
    Record = 9,
    Ack = 10,
    Log = 11,
    Policy = 12,
    PolicyApplied = 13,
};

inline constexpr uint32_t kMaxFrame = 4u << 20;  // a Start frame carries the compiled bundle
inline constexpr std::string_view kAckPark = "park";

// qemu's user-mode network as both ends see it: the guest's resolver, which
// forwards each query to the host's resolvers (the host's
// /etc/resolv.conf) as the VMM's own (vmm_bundle.h, guest_bundle).
inline constexpr const char* kGuestDnsForwarder = "10.0.2.3";

// A canary VM's guest agent (booted with `bulwark.canary` on its kernel
// command line) prints this on its console, then powers off: the guest ran
// to its first program under the VMM's accelerator (vm/kvm_canary.h).
inline constexpr const char* kCanaryAnswer = "canary: the guest agent runs";

struct Frame {
    FrameType type;
    std::string payload;
};

// Which end a frame type may come from.
bool from_guest(FrameType t);
bool from_host(FrameType t);
std::string_view frame_name(FrameType t);

// One frame's bytes.
std::string encode(FrameType type, std::string_view payload = {});

// Reassembles frames from the bytes as they arrive, for the frames one end
// accepts (from_guest on the host, from_host in the guest).
class FrameReader {
public:
    explicit FrameReader(bool (*accept)(FrameType)) : accept_(accept) {}
    void feed(std::string_view bytes) { buf_.append(bytes); }
    // The next whole frame, nothing when more bytes are needed, or the
    // protocol error (sticky: every later call returns it again).
    std::expected<std::optional<Frame>, std::string> next();
    size_t buffered() const { return buf_.size() - off_; }

private:
    bool (*accept_)(FrameType);
    std::string buf_;
    size_t off_ = 0;
    std::string error_;
};

// Writes all of `bytes` to a blocking fd (EINTR retried); false on error.
bool write_all(int fd, std::string_view bytes);

}  // namespace bulwark::vm
