#include "bpf/feature_probe.h"

#include <bpf/libbpf.h>
#include <spdlog/spdlog.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>

namespace bulwark::bpf {
namespace {

thread_local std::string* g_capture = nullptr;

int libbpf_print(enum libbpf_print_level level, const char* fmt, va_list args) {
    va_list copy;
    va_copy(copy, args);
    int n = std::vsnprintf(nullptr, 0, fmt, copy);
    va_end(copy);
    if (n <= 0) return 0;
    std::string msg(static_cast<size_t>(n) + 1, '\0');  // verifier logs arrive in one call
    std::vsnprintf(msg.data(), msg.size(), fmt, args);
    msg.resize(static_cast<size_t>(n));
    if (g_capture) {
        g_capture->append(msg);
        while (!msg.empty() && msg.back() == '\n') msg.pop_back();
        spdlog::debug("libbpf: {}", msg);
        return 0;
    }
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    switch (level) {
    case LIBBPF_WARN: spdlog::warn("libbpf: {}", msg); break;
    case LIBBPF_INFO: spdlog::info("libbpf: {}", msg); break;
    default: spdlog::debug("libbpf: {}", msg); break;
    }
    return 0;
}

}  // namespace

const char* to_string(ProgState s) {
    switch (s) {
    case ProgState::Enforcing: return "enforcing";
    case ProgState::Observing: return "observing";
    case ProgState::Attached: return "attached";
    case ProgState::Unavailable: return "unavailable";
    }
    return "?";
}

std::string ProgramStatus::line() const {
    std::string s = section + ": " + to_string(state);
    if (adopted) s += " (adopted from pin)";
    if (!reason.empty()) s += ": " + reason;
    return s;
}

void route_libbpf_logs() {
    static std::once_flag once;
    std::call_once(once, [] { libbpf_set_print(libbpf_print); });
}

LibbpfCapture::LibbpfCapture() : prev_(g_capture) { g_capture = &text_; }
LibbpfCapture::~LibbpfCapture() { g_capture = prev_; }

std::string LibbpfCapture::verifier_log() const {
    static const std::string begin = "-- BEGIN PROG LOAD LOG --", end = "-- END PROG LOAD LOG --";
    auto b = text_.find(begin);
    if (b == std::string::npos) return {};
    b += begin.size();
    auto e = text_.find(end, b);
    std::string log = text_.substr(b, e == std::string::npos ? std::string::npos : e - b);
    while (!log.empty() && (log.front() == '\n')) log.erase(log.begin());
    while (!log.empty() && (log.back() == '\n')) log.pop_back();
    return log;
}

std::string load_failure_reason(int err, const std::string& verifier_log) {
    if (err < 0) err = -err;
    if (err == ESRCH || err == ENOENT)
        return "attach point not in this kernel: " + errno_name(err);
    if (!verifier_log.empty()) {
        std::istringstream in(verifier_log);
        std::string line, last;
        while (std::getline(in, line))
            if (!line.empty()) last = line;
        return "verifier rejected: " + last + " (" + errno_name(err) + ")";
    }
    return "kernel refused load: " + errno_name(err);
}

HostFacts probe_host() {
    HostFacts f;
    f.btf = access("/sys/kernel/btf/vmlinux", R_OK) == 0;
    struct statfs sfs{};
    f.bpffs = statfs("/sys/fs/bpf", &sfs) == 0 && static_cast<unsigned long>(sfs.f_type) == 0xcafe4a11UL;
    std::ifstream lsm("/sys/kernel/security/lsm");
    std::getline(lsm, f.lsm_list);
    struct utsname u{};
    if (uname(&u) == 0) f.kernel_release = u.release;
    return f;
}

}  // namespace bulwark::bpf
