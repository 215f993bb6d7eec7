#pragma once
// What each Bulwark BPF program achieved on this kernel, and the plumbing that
// finds out: libbpf's messages routed into spdlog (and captured while a
// program is probed, so its verifier log can be kept), errno -> precise reason.
#include <cstdint>
#include <string>

#include "common/sys_error.h"
#include <vector>

namespace bulwark::bpf {

enum class ProgState : uint8_t {
    Enforcing,    // loaded, attached, and a canary it must deny was denied by it
    Observing,    // monitor program: loaded, attached, canary event seen
    Attached,     // loaded and attached, not (yet) proven by a canary; reason says why
    Unavailable,  // not loaded or not attached; reason says exactly why
};
const char* to_string(ProgState s);

struct ProgramStatus {
    std::string object;   // "lsm", "sock_addr", "monitor"
    std::string name;     // function name, e.g. "bw_file_open"
    std::string section;  // attach point, e.g. "lsm/file_open"
    ProgState state = ProgState::Unavailable;
    bool adopted = false;      // link re-adopted from the pin root (loaded by an earlier run)
    std::string reason;        // "kernel refused load: EPERM", "canary not denied: ..."
    std::string verifier_log;  // kernel verifier log of a failed load, if any

    // "lsm/file_open: unavailable: kernel refused load: EPERM"
    std::string line() const;
};

// Installs the libbpf print callback that forwards to spdlog. Idempotent.
void route_libbpf_logs();

// While alive, libbpf output on this thread is captured (and logged at debug
// level only): used around probe loads whose failure is expected.
class LibbpfCapture {
public:
    LibbpfCapture();
    ~LibbpfCapture();
    LibbpfCapture(const LibbpfCapture&) = delete;
    LibbpfCapture& operator=(const LibbpfCapture&) = delete;
    const std::string& text() const { return text_; }
    // The verifier log libbpf printed between its BEGIN/END PROG LOAD LOG markers.
    std::string verifier_log() const;

private:
    std::string text_;
    std::string* prev_;
};

// Reason for a failed program load: "kernel refused load: EPERM",
// "verifier rejected: <last log line> (EACCES)", "attach point not in this kernel: ESRCH".
std::string load_failure_reason(int err, const std::string& verifier_log);

// Host facts worth printing next to program states.
struct HostFacts {
    bool btf = false;            // /sys/kernel/btf/vmlinux
    bool bpffs = false;          // /sys/fs/bpf is a bpffs mount
    std::string lsm_list;        // /sys/kernel/security/lsm, if readable
    std::string kernel_release;  // uname -r
};
HostFacts probe_host();

}  // namespace bulwark::bpf
