#pragma once
// What a launch takes from its policy and its caller before anything is
// created: the tool's binary (resolved against the policy's list, opened
// once, content-pinned when the policy says so) and its environment.
#include <expected>
#include <string>
#include <utility>
#include <vector>

#include "bulwark/policy/bundle.h"
#include "common/fd.h"
#include "sandbox/hardening.h"
#include "sandbox/run_report.h"
#include "sandbox/spawner.h"

namespace bulwark {

// The verified binary the child executes by descriptor, and how it was
// verified ("binary /usr/bin/cat sha256-pinned"). A setuid/setgid bit is
// noted in sup.dropped (it has no effect in the sandbox). A bare name is a
// listed binary's file name, else (with `search_path`, a PATH value) the
// file execvp would run; either way the file it resolves to must be listed.
struct ToolBinary {
    Fd fd;
    std::string how;
    std::string path;  // the file it resolves to
};
std::expected<ToolBinary, std::string> open_policy_binary(const policy::Bundle& b, const std::string& arg0,
                                                          LayerStatus& sup, const std::string& search_path = {});

// The tool's environment ("NAME=value", sorted): the caller's (or this
// process's) as the policy's environment plan filters and sets it.
std::vector<std::string> build_env(const policy::EnvPlan& plan, const RunRequest& req);

// The tool's environment with its hardening applied: the environment plan,
// then the ELF properties of the binary and its libraries checked and MTE
// merged into GLIBC_TUNABLES. An error refuses the launch.
struct ToolEnvironment {
    std::vector<std::string> env;
    HardeningPrep hardening;
};
std::expected<ToolEnvironment, std::string> prepare_tool_environment(const policy::Bundle& b, int exe_fd,
                                                                     const std::string& exe_name,
                                                                     const RunRequest& req);

// sha256 of a file's contents (lowercase hex), via OpenSSL EVP.
std::expected<std::string, std::string> sha256_fd(int fd);

}  // namespace bulwark
