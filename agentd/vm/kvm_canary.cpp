#include "vm/kvm_canary.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include "bulwark/policy/private_files.h"
#include "common/fd.h"
#include "vm/channel.h"

extern char** environ;

namespace bulwark::vm {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr const char* kVerdictDir = "/run/bulwark/kvm-canary";

// The end of what the canary printed, on one line.
std::string console_tail(const std::string& console) {
    std::string t = console.size() > 400 ? console.substr(console.size() - 400) : console;
    for (char& c : t)
        if (c == '\n' || c == '\r' || c == '\t') c = ' ';
        else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    while (!t.empty() && t.back() == ' ') t.pop_back();
    return t.empty() ? "(nothing)" : t;
}

// Where this boot's verdict for this qemu and image is kept ("" for none:
// the directory cannot be made this user's alone).
std::string verdict_path(const Vmm& v, const GuestImage& img) {
    if (!policy::make_private_dir(kVerdictDir).empty()) return "";
    struct stat st{};
    if (::stat(v.binary.c_str(), &st) != 0) return "";
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::string boot;
    std::getline(in, boot);
    std::string digest = img.digest.substr(img.digest.find(':') + 1, 16);
    if (boot.size() < 8 || digest.empty()) return "";
    return std::string(kVerdictDir) + "/" + digest + "-" + boot.substr(0, 8) + "-" + std::to_string(st.st_size) + "-" +
           std::to_string(st.st_mtime) + ".json";
}

struct Verdict {
    std::string why;  // "" = KVM runs the guest
    uint64_t ms = 0;
};

// A verdict kept by this user in a directory only it writes, else none.
std::optional<Verdict> kept_verdict(const std::string& path) {
    if (path.empty()) return std::nullopt;
    auto text = policy::read_private_file(path, 65536);
    if (!text) return std::nullopt;
    auto j = json::parse(*text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("why") || !j["why"].is_string()) return std::nullopt;
    return Verdict{j["why"].get<std::string>(), j.value("ms", uint64_t(0))};
}

void keep_verdict(const std::string& path, const Verdict& v) {
    if (!path.empty()) (void)policy::write_private_file(path, json{{"why", v.why}, {"ms", v.ms}}.dump());
}

}  // namespace

std::string boot_canary(const Vmm& v, const GuestImage& img, std::chrono::milliseconds deadline) {
    VmShape shape;
    shape.memory_bytes = 128ull << 20;
    shape.canary = true;
    auto argv = qemu_argv(v, img, shape);
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);

    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return std::string("pipe: ") + std::strerror(errno);
    Fd rd(out[0]), wr(out[1]);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, wr.get(), 1);
    posix_spawn_file_actions_adddup2(&fa, wr.get(), 2);
    pid_t pid = -1;
    int rc = ::posix_spawn(&pid, cargv[0], &fa, nullptr, cargv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    wr.reset();
    if (rc != 0) return "spawning " + v.binary + ": " + std::strerror(rc);

    const std::string answer = kCanaryAnswer;
    const auto end = Clock::now() + deadline;
    std::string console;
    bool answered = false, eof = false;
    char buf[4096];
    while (!answered && !eof) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
        if (left <= 0) break;
        pollfd p{rd.get(), POLLIN, 0};
        int n = ::poll(&p, 1, int(std::min<long long>(left, 1000)));
        if (n < 0 && errno != EINTR) break;
        if (n <= 0) continue;
        ssize_t got = ::read(rd.get(), buf, sizeof buf);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            eof = true;
            break;
        }
        console.append(buf, size_t(got));
        answered = console.find(answer) != std::string::npos;
        if (console.size() > 262144) console.erase(0, console.size() - 65536);
    }
    // Answered: the guest powers off by itself (a grace of 2 s); otherwise,
    // or if it lingers, the VMM is killed.
    int status = 0;
    pid_t w = 0;
    for (int i = 0; answered && i < 200 && (w = ::waitpid(pid, &status, WNOHANG)) == 0; ++i) ::usleep(10000);
    if (w != pid) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
    }
    if (answered) return "";
    if (eof)
        return "qemu ended before the guest agent answered (" +
               (WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                  : "signal " + std::to_string(WTERMSIG(status))) +
               "); its console ends: " + console_tail(console);
    return "no answer from the guest agent within " + std::to_string(deadline.count()) +
           " ms; its console ends: " + console_tail(console);
}

void settle_accel(Vmm& vmm, const GuestImage& img) {
    const char* mode = std::getenv("BULWARK_KVM_CANARY");
    const bool always = mode && std::string(mode) == "always";
    if (vmm.accel != "kvm" && !always) return;
    std::chrono::milliseconds deadline{10000};
    if (const char* t = std::getenv("BULWARK_KVM_CANARY_TIMEOUT_MS"); t && *t)
        deadline = std::chrono::milliseconds(std::strtoull(t, nullptr, 10));
    const std::string path = always ? "" : verdict_path(vmm, img);
    auto verdict = kept_verdict(path);
    const bool kept = verdict.has_value();
    if (!verdict) {
        auto ms_since = [](Clock::time_point t) {
            return uint64_t(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count());
        };
        Vmm kvm = vmm;
        kvm.accel = "kvm";
        auto t0 = Clock::now();
        std::string why = boot_canary(kvm, img, deadline);
        const uint64_t ms = ms_since(t0);
        if (!why.empty()) {
            // The control: the same canary under TCG says whether the image
            // and its agent work at all, so that the reason is KVM's.
            Vmm tcg = vmm;
            tcg.accel = "tcg";
            auto t1 = Clock::now();
            std::string control = boot_canary(tcg, img, std::max(deadline, std::chrono::milliseconds(30000)));
            why += control.empty() ? "; the same canary under TCG answered in " + std::to_string(ms_since(t1)) +
                                         " ms (the image and its agent work; KVM does not run them)"
                                   : "; the same canary under TCG did not answer either: " + control;
        }
        verdict = Verdict{why, ms};
        keep_verdict(path, *verdict);
    }
    if (verdict->why.empty()) {
        vmm.accel = "kvm";
        vmm.why_accel = "KVM, proven by a canary VM of this image (its guest agent answered in " +
                        std::to_string(verdict->ms) + " ms" + (kept ? "; this boot's verdict" : "") + ")";
        return;
    }
    std::string before = vmm.accel == "kvm" ? "" : vmm.why_accel + "; ";
    if (before.starts_with("no usable KVM: ")) before = before.substr(15);
    vmm.accel = "tcg";
    vmm.why_accel = "no usable KVM: " + before + "the KVM canary VM" + (always ? " (BULWARK_KVM_CANARY=always)" : "") +
                    ": " + verdict->why + (kept ? " (this boot's verdict)" : "");
}

}  // namespace bulwark::vm
