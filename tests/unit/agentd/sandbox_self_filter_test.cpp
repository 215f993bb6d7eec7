// agentd's own seccomp filter against the tools' rules (sandbox/self_privilege:
// refused_by_own_filter): the filter is inherited by every sandbox, so a
// syscall a tool's rules allow and agentd-self.yaml does not answers errno 131
// in the tool's runs; `agentd serve --self-seccomp` says so at start.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "bulwark/policy/compiler.h"
#include "sandbox/self_privilege.h"

namespace fs = std::filesystem;
using namespace bulwark;

namespace {

const std::string kRules = std::string(BULWARK_SOURCE_DIR) + "/rules";

policy::Bundle compiled_file(const std::string& path) {
    auto r = policy::compile_file(path, {.rules_dirs = {kRules}});
    INFO(path << ": " << policy::render_diagnostics(r));
    REQUIRE(r.ok());
    return *r.bundle;
}

// The filter as agentd serve loads it: the bundle policyc writes, read back.
SelfFilter self_filter_of(const policy::Bundle& b) {
    const fs::path file = fs::temp_directory_path() / ("bulwark-self-filter-" + std::to_string(::getpid()) + ".json");
    std::ofstream(file) << policy::bundle_to_json(b).dump();
    auto f = load_self_filter(file.string());
    fs::remove(file);
    INFO((f ? "" : f.error()));
    REQUIRE(f);
    return *f;
}

}  // namespace

TEST_CASE("agentd's own filter refuses none of the shipped tools' syscalls", "[privilege][seccomp]") {
    const SelfFilter self = self_filter_of(compiled_file(std::string(BULWARK_SOURCE_DIR) +
                                                         "/deploy/systemd/agentd-self.yaml"));
    size_t tools = 0;
    for (const auto& e : fs::recursive_directory_iterator(kRules)) {
        if (e.path().extension() != ".yaml" || e.path().string().find("/tests/") != std::string::npos) continue;
        const auto tool = compiled_file(e.path().string());
        std::string refused;
        for (const auto& r : refused_by_own_filter(self, tool)) refused += r.syscall + " (" + r.rule + ") ";
        INFO(e.path().string());
        CHECK(refused.empty());
        ++tools;
    }
    CHECK(tools >= 20);
}

TEST_CASE("a tool rule allowing a syscall outside agentd's own filter is named with its rule", "[privilege][seccomp]") {
    const SelfFilter self = self_filter_of(compiled_file(std::string(BULWARK_SOURCE_DIR) +
                                                         "/deploy/systemd/agentd-self.yaml"));
    auto r = policy::compile_string(R"(tool: logger
description: reads the kernel log
extends: base/minimal
binaries: [/usr/bin/dmesg]
syscalls:
  allow:
    - unshare
    - syslog
)",
                                    "logger.yaml", {.rules_dirs = {kRules}});
    INFO(policy::render_diagnostics(r));
    REQUIRE(r.ok());
    const auto refused = refused_by_own_filter(self, *r.bundle);
    REQUIRE(refused.size() == 1);  // unshare is in agentd-self.yaml's list
    CHECK(refused[0].syscall == "syslog");
    CHECK(refused[0].rule.starts_with("logger.yaml:8:7: "));
    // The control: under a filter that is the tool's own, nothing is refused.
    CHECK(refused_by_own_filter(self_filter_of(*r.bundle), *r.bundle).empty());
}

TEST_CASE("a tool's socket family outside agentd's own filter is named with its rule", "[privilege][seccomp]") {
    const SelfFilter self = self_filter_of(compiled_file(std::string(BULWARK_SOURCE_DIR) +
                                                         "/deploy/systemd/agentd-self.yaml"));
    auto r = policy::compile_string(R"(tool: sniffer
description: reads packets
extends: base/minimal
binaries: [/usr/bin/true]
network:
  families: [unix, packet]
)",
                                    "sniffer.yaml", {.rules_dirs = {kRules}});
    INFO(policy::render_diagnostics(r));
    REQUIRE(r.ok());
    std::vector<std::string> names;
    for (const auto& x : refused_by_own_filter(self, *r.bundle)) {
        names.push_back(x.syscall);
        if (x.syscall == "socket(packet)") CHECK(x.rule.starts_with("sniffer.yaml:6:20: network.families: packet"));
    }
    CHECK(names == std::vector<std::string>{"socket(packet)", "socketpair(packet)"});
    // The control: netlink is in agentd-self.yaml's families with the route
    // protocol, and so a tool listing route alone is not named.
    auto nl = policy::compile_string("tool: ip\ndescription: lists links\nextends: base/minimal\n"
                                     "binaries: [/usr/bin/true]\nnetwork:\n  families: [unix, netlink]\n"
                                     "  netlink: [route]\n",
                                     "ip.yaml", {.rules_dirs = {kRules}});
    REQUIRE(nl.ok());
    CHECK(refused_by_own_filter(self, *nl.bundle).empty());
    // A protocol beyond agentd's own list is named with the tool's rule for
    // it; a tool with every netlink protocol open, with its family's rule.
    auto xfrm = policy::compile_string("tool: ip\ndescription: lists links\nextends: base/minimal\n"
                                       "binaries: [/usr/bin/true]\nnetwork:\n  families: [unix, netlink]\n"
                                       "  netlink: [route, xfrm]\n",
                                       "ip.yaml", {.rules_dirs = {kRules}});
    REQUIRE(xfrm.ok());
    auto named = refused_by_own_filter(self, *xfrm.bundle);
    REQUIRE(named.size() == 1);
    CHECK(named[0].syscall == "socket(netlink xfrm)");
    CHECK(named[0].rule == "ip.yaml:7:20: network.netlink: xfrm");
    auto open = policy::compile_string("tool: ip\ndescription: lists links\nextends: base/minimal\n"
                                       "binaries: [/usr/bin/true]\nnetwork:\n  families: [unix, netlink]\n",
                                       "ip.yaml", {.rules_dirs = {kRules}});
    REQUIRE(open.ok());
    named = refused_by_own_filter(self, *open.bundle);
    std::vector<std::string> protos;
    for (const auto& x : named) {
        protos.push_back(x.syscall);
        CHECK(x.rule == "ip.yaml:6:20: network.families: netlink");
    }
    CHECK(std::find(protos.begin(), protos.end(), "socket(netlink sock_diag)") != protos.end());
    CHECK(std::find(protos.begin(), protos.end(), "socket(netlink route)") == protos.end());
    CHECK(std::find(protos.begin(), protos.end(), "socket(netlink audit)") == protos.end());
}
