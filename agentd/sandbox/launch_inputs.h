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
#include "sandbox/run_report.h"
#include "sandbox/spawner.h"

namespace bulwark {

// The verified binary the child executes by descriptor, and how it was
// verified ("binary /usr/bin/cat sha256-pinned"). A setuid/setgid bit is
// noted in sup.dropped (it has no effect in the sandbox).
struct ToolBinary {
    Fd fd;
    std::string how;
};
std::expected<ToolBinary, std::string> open_policy_binary(const policy::Bundle& b, const std::string& arg0,
                                                          LayerStatus& sup);

// The tool's environment ("NAME=value", sorted): the caller's (or this
// process's) as the policy's environment plan filters and sets it.
std::vector<std::string> build_env(const policy::EnvPlan& plan, const RunRequest& req);

// sha256 of a file's contents (lowercase hex), via OpenSSL EVP.
std::expected<std::string, std::string> sha256_fd(int fd);

}  // namespace bulwark
