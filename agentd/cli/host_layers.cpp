#include "cli/host_layers.h"

#include <sched.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

#include "bulwark/policy/elf_props.h"
#include "sandbox/cgroup.h"
#include "sandbox/hardening.h"
#include "sandbox/landlock.h"
#include "sandbox/seccomp_install.h"

namespace bulwark {
namespace {

using json = nlohmann::json;

json layer(std::string_view state, std::string detail) { return {{"state", state}, {"detail", std::move(detail)}}; }

// A child unshares every namespace a run gets; its exit status carries errno.
json namespaces_layer() {
    constexpr int flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |
                          CLONE_NEWCGROUP;
    pid_t pid = fork();
    if (pid < 0) return layer("unavailable", std::string("fork for the namespace canary: ") + std::strerror(errno));
    if (pid == 0) _exit(unshare(flags) == 0 ? 0 : (errno & 0xff));
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        return layer("enforcing", "user, mount, pid, net, ipc, uts and cgroup namespaces created by a canary child");
    if (WIFEXITED(st))
        return layer("unavailable", "unshare(user|mnt|pid|net|ipc|uts|cgroup) failed: " +
                                        errno_name(WEXITSTATUS(st)));
    return layer("unavailable", "namespace canary child died");
}

json cgroup_layer() {
    auto v2 = cgroup_mount("");
    if (v2.empty()) return layer("unavailable", "no cgroup v2 hierarchy mounted");
    auto own = own_cgroup("");
    return layer("enforcing", "cgroup v2 at " + v2 + (own.empty() ? "" : ", agentd in " + own) +
                                  (cgroup_mount("memory").empty() ? "" : "; v1 memory controller too"));
}

// What agentd asks of the tools, read off agentd itself: each ELF property of
// the running binary, and what the build's toolchain could not give
// (cmake/BulwarkHardening.cmake).
json own_hardening() {
    json props = json::object();
    auto self = read_elf_props("/proc/self/exe");
    if (!self) return {{"error", self.error()}};
    const bool arm = self->machine == 183;  // EM_AARCH64
    for (const char* n : {"pie", "relro", "bind-now", "nx", "stack-protector", "fortify"})
        props[n] = elf_property(*self, n).second;
    static constexpr const char* kArm[] = {"bti", "pac"};
    static constexpr const char* kX86[] = {"cet-ibt", "cet-shstk"};
    for (const char* n : arm ? kArm : kX86) props[n] = elf_property(*self, n).second;
    json lacks = json::array();
    std::string l = BULWARK_HARDENING_LACKS;
    for (size_t at = 0; !l.empty() && at != std::string::npos;) {
        size_t semi = l.find('|', at);
        lacks.push_back(l.substr(at, semi == std::string::npos ? semi : semi - at));
        at = semi == std::string::npos ? semi : semi + 1;
    }
    return {{"binary", self->path}, {"properties", props}, {"toolchain_lacks", lacks}};
}

json hardening_facts() {
    auto cpu = CpuFeatures::probe();
    std::string d = cpu.arch + ": MTE " + (cpu.mte ? "supported" : "not supported");
    int ssb = prctl(PR_GET_SPECULATION_CTRL, PR_SPEC_STORE_BYPASS, 0, 0, 0);
    int ib = prctl(PR_GET_SPECULATION_CTRL, PR_SPEC_INDIRECT_BRANCH, 0, 0, 0);
    auto spec = [](int v) -> std::string {
        if (v < 0) return "unknown";
        if (v == PR_SPEC_NOT_AFFECTED) return "CPU not affected";
        if (v & PR_SPEC_PRCTL) return "per-process control";
        if (v & (PR_SPEC_DISABLE | PR_SPEC_FORCE_DISABLE)) return "disabled for all tasks";
        return "no control";
    };
    d += "; speculative store bypass: " + spec(ssb) + "; indirect branch: " + spec(ib) +
         "; what each run got is in its run_exit record (detail.hardening)";
    return {{"arch", cpu.arch}, {"mte", cpu.mte}, {"detail", d}, {"self", own_hardening()}};
}

int state_rank(std::string_view s) {
    if (s == "enforcing") return 0;
    if (s == "observing") return 1;
    if (s == "attached") return 2;
    return 3;
}

}  // namespace

json bpf_layers_from_status(const json& status) {
    static const char* kNames[] = {"bpf_lsm", "sock_addr", "sock_unix", "monitor"};
    json out = json::object();
    const json* progs = status.is_object() && status.contains("programs") && status["programs"].is_object()
                            ? &status["programs"]
                            : nullptr;
    if (!progs) {
        std::string why = status.is_object() && status.contains("state") && status["state"].is_string()
                              ? status["state"].get<std::string>()
                              : "no BPF status";
        if (why.starts_with("unavailable: ")) why = why.substr(13);
        for (const char* n : kNames) out[n] = layer("unavailable", why);
        return out;
    }
    struct Acc {
        int worst = -1;
        std::string reason;
        json lines = json::array();
    };
    std::map<std::string, Acc> acc;
    for (const auto& [section, v] : progs->items()) {
        std::string text = v.is_string() ? v.get<std::string>() : v.dump();
        std::string word = text.substr(0, text.find(':'));
        std::string name = section.starts_with("lsm")                                    ? "bpf_lsm"
                           : section.ends_with("_unix") && section.starts_with("cgroup/") ? "sock_unix"
                           : section.starts_with("cgroup")                               ? "sock_addr"
                                                                                         : "monitor";
        Acc& a = acc[name];
        a.lines.push_back(section + ": " + text);
        // an opt-in program that was not asked for does not weaken its layer
        if (text.find("not requested") != std::string::npos) continue;
        int rank = state_rank(word);
        if (rank > 1 && a.reason.empty()) a.reason = section + ": " + text;
        a.worst = std::max(a.worst, rank);
    }
    static const char* kStates[] = {"enforcing", "observing", "attached", "unavailable"};
    for (const char* n : kNames) {
        auto it = acc.find(n);
        if (it == acc.end() || it->second.worst < 0) {
            out[n] = layer("unavailable", "no program of this layer was loaded");
            continue;
        }
        json l = layer(kStates[it->second.worst], it->second.reason.empty()
                                                      ? std::to_string(it->second.lines.size()) + " programs proven by canaries"
                                                      : it->second.reason);
        l["programs"] = std::move(it->second.lines);
        out[n] = std::move(l);
    }
    return out;
}

json probe_host_layers(const std::vector<bpf::ProgramStatus>* programs) {
    json layers = json::object();
    layers["namespaces"] = namespaces_layer();
    layers["cgroup"] = cgroup_layer();
    const std::string& sc = seccomp_canary();
    layers["seccomp"] = sc.empty() ? layer("enforcing", "canary filter applied by the kernel") : layer("unavailable", sc);
    int abi = landlock_abi();
    if (abi <= 0) {
        layers["landlock"] = layer("unavailable", "Landlock not available in this kernel (ABI 0)");
    } else {
        const std::string& lc = landlock_canary();
        layers["landlock"] = lc.empty() ? layer("enforcing", "ABI " + std::to_string(abi) + ", canary denied")
                                        : layer("unavailable", lc);
    }
    // BPF objects: one layer per object, the weakest program decides its
    // state; every program's line is kept.
    static const std::map<std::string, std::string> kObjectLayer = {
        {"lsm", "bpf_lsm"}, {"sock_addr", "sock_addr"}, {"sock_unix", "sock_unix"}, {"monitor", "monitor"}};
    if (!programs) {
        for (const auto& [obj, name] : kObjectLayer)
            layers[name] = layer("unavailable", "BPF programs not loaded by this daemon");
    } else {
        for (const auto& [obj, name] : kObjectLayer) {
            int worst = -1;
            json lines = json::array();
            std::string first_reason;
            for (const auto& p : *programs) {
                if (p.object != obj) continue;
                lines.push_back(p.line());
                worst = std::max(worst, int(p.state));
                if (p.state != bpf::ProgState::Enforcing && p.state != bpf::ProgState::Observing && first_reason.empty())
                    first_reason = p.line();
            }
            if (worst < 0) {
                layers[name] = layer("unavailable", "no program of object '" + obj + "' was loaded");
                continue;
            }
            auto st = bpf::ProgState(worst);
            json l = layer(bpf::to_string(st), first_reason.empty()
                                                   ? std::to_string(lines.size()) + " programs proven by canaries"
                                                   : first_reason);
            l["programs"] = std::move(lines);
            layers[name] = std::move(l);
        }
    }
    auto facts = bpf::probe_host();
    return {{"kernel", facts.kernel_release},
            {"lsm", facts.lsm_list},
            {"btf", facts.btf},
            {"bpffs", facts.bpffs},
            {"layers", std::move(layers)},
            {"hardening", hardening_facts()}};
}

}  // namespace bulwark
