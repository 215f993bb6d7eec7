#include "sandbox/launch_inputs.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>

#include "common/digest.h"
#include "common/sys_error.h"

extern char** environ;

namespace bulwark {

std::expected<ToolBinary, std::string> open_policy_binary(const policy::Bundle& b, const std::string& arg0,
                                                          LayerStatus& sup, const std::string& search_path) {
    if (b.binaries.empty()) return std::unexpected("the policy lists no binaries; nothing may be started");
    std::string wanted = arg0;
    if (wanted.find('/') == std::string::npos) {
        for (const auto& bin : b.binaries) {
            auto slash = bin.path.rfind('/');
            if (bin.path.substr(slash + 1) == wanted) {
                wanted = bin.path;
                break;
            }
        }
        // Then where execvp would find it (a link such as sh -> busybox is
        // judged by the file it resolves to, below).
        for (size_t at = 0; wanted.find('/') == std::string::npos && !search_path.empty() && at <= search_path.size();) {
            size_t end = search_path.find(':', at);
            if (end == std::string::npos) end = search_path.size();
            std::string dir = search_path.substr(at, end - at);
            std::string candidate = (dir.empty() ? "." : dir) + "/" + arg0;
            struct stat st{};
            if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0)
                wanted = candidate;
            at = end + 1;
        }
        if (wanted.find('/') == std::string::npos)
            return std::unexpected("'" + arg0 + "' names none of the policy's binaries" +
                                   (search_path.empty() ? "" : " and is not found in PATH " + search_path));
    }
    char real[PATH_MAX];
    if (!::realpath(wanted.c_str(), real)) return std::unexpected("realpath(" + wanted + "): " + errno_text(errno));
    const policy::Binary* match = nullptr;
    for (const auto& bin : b.binaries) {
        char r2[PATH_MAX];
        if (::realpath(bin.path.c_str(), r2) && std::strcmp(r2, real) == 0) {
            match = &bin;
            break;
        }
    }
    if (!match) return std::unexpected(std::string(real) + " is not one of the policy's binaries");
    int fd = ::open(real, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return std::unexpected(std::string("open(") + real + "): " + errno_text(errno));
    Fd bin(fd);
    struct stat st{};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return std::unexpected(std::string(real) + ": not a regular file");
    if (st.st_mode & (S_ISUID | S_ISGID)) sup.dropped.push_back("setuid/setgid bit of the tool ignored (nosuid, no_new_privs)");
    std::string how = "binary " + std::string(real);
    if (match->sha256) {
        auto h = sha256_fd(fd);
        if (!h) return std::unexpected(h.error());
        if (*h != *match->sha256)
            return std::unexpected(std::string(real) + ": sha256 " + *h + " differs from the pinned " + *match->sha256);
        how += " sha256-pinned";
    }
    return ToolBinary{std::move(bin), how, real};
}

std::vector<std::string> build_env(const policy::EnvPlan& plan, const RunRequest& req) {
    std::map<std::string, std::string> caller;
    if (req.caller_env) {
        for (const auto& [k, v] : *req.caller_env) caller[k] = v;
    } else {
        for (char** e = environ; e && *e; ++e) {
            std::string kv = *e;
            auto eq = kv.find('=');
            if (eq != std::string::npos) caller[kv.substr(0, eq)] = kv.substr(eq + 1);
        }
    }
    std::map<std::string, std::string> env;
    if (!plan.clear_all) env = caller;
    for (const auto& name : plan.pass)
        if (auto it = caller.find(name); it != caller.end()) env[name] = it->second;
    for (const auto& [k, v] : plan.set) env[k] = v;
    std::vector<std::string> out;
    for (const auto& [k, v] : env) out.push_back(k + "=" + v);
    return out;
}

std::expected<ToolEnvironment, std::string> prepare_tool_environment(const policy::Bundle& b, int exe_fd,
                                                                     const std::string& exe_name,
                                                                     const RunRequest& req) {
    ToolEnvironment out;
    out.env = build_env(b.env, req);
    auto hard = harden_env(out.env, b.hardening, exe_fd, exe_name, CpuFeatures::probe());
    if (!hard) return std::unexpected(hard.error());
    out.hardening = std::move(*hard);
    return out;
}

std::expected<std::string, std::string> sha256_fd(int fd) {
    std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
    if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) return std::unexpected("EVP sha256 init failed");
    unsigned char buf[1 << 16];
    off_t off = 0;
    while (true) {
        ssize_t n = ::pread(fd, buf, sizeof buf, off);
        if (n < 0) {
            if (errno == EINTR) continue;
            return std::unexpected("pread: " + errno_text(errno));
        }
        if (n == 0) break;
        off += n;
        if (EVP_DigestUpdate(ctx.get(), buf, n) != 1) return std::unexpected("EVP_DigestUpdate failed");
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    if (EVP_DigestFinal_ex(ctx.get(), md, &len) != 1) return std::unexpected("EVP_DigestFinal_ex failed");
    return to_hex(md, len);
}

}  // namespace bulwark
