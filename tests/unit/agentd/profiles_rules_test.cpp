// agentd/profiles: a behaviour profile exported as a rule file, cut from its
// tool's own rules to what the learned runs used, compiled back.
#include <catch2/catch.hpp>

#include <algorithm>

#include "bulwark/policy/compiler.h"
#include "bulwark/policy/rule_file_text.h"
#include "profiles/profile_rules.h"

using namespace bulwark;
using namespace bulwark::profiles;
using nlohmann::json;

namespace {

constexpr const char* kExportedTool = R"(tool: fetcher
binaries: [/bin/sh]
files:
  read: [/etc, /usr/share/ca-certificates, /opt/tools]
  write: ["${workdir}"]
  create: ["${workdir}/out"]
  deny: ["${workdir}/.git/hooks", {path: /etc/shadow, rights: [read]}]
exec:
  allow: [/usr/bin, /bin/sh]
network:
  connect:
    - { cidr: 10.0.0.0/8, ports: [443, 8443], proto: tcp }
    - { cidr: 192.168.0.0/16, ports: [80] }
    - { host: api.example.invalid, ports: [443] }
  deny: [{ cidr: 169.254.169.254/32 }]
  dns: [127.0.0.53]
  unix:
    connect: [/run/app/, /run/other.sock]
syscalls:
  baseline: default
  deny: [ptrace]
limits:
  timeout: 30s
  memory: 256MiB
)";

// A profile that learned three runs of the same shape.
Profile learned(const json& features) {
    Profile p("fetcher", 3);
    for (int i = 0; i < 3; ++i) p.learn(RunFeatures::from_json(features));
    return p;
}

policy::CompileOptions rules_options() { return {}; }

const json* entry_of(const ProfileRules& r, std::string_view text) {
    for (const auto& e : r.entries)
        if (e.value("text", std::string()) == text) return &e;
    return nullptr;
}

bool has_file(const policy::Bundle& b, std::string_view path, uint32_t right) {
    return std::any_of(b.files.begin(), b.files.end(),
                       [&](const policy::FileRule& f) { return f.path == path && (f.allow & right); });
}

}  // namespace

TEST_CASE("a profile as a rule file: the tool's allows cut to what its runs used, denies and the rest its own",
          "[profiles][rules]") {
    auto opts = rules_options();
    auto compiled = policy::compile_string(kExportedTool, "fetcher.yaml", opts);
    INFO(policy::render_diagnostics(compiled));
    REQUIRE(compiled.ok());
    auto flat = policy::flatten_rule_string(kExportedTool, "fetcher.yaml", opts);
    REQUIRE(flat);
    const auto profile = learned({{"file_area", {"read /etc/ssl", "read /usr/share/ca-certificates", "write ${workdir}"}},
                                  {"exec", {std::string(kLaunch), "/usr/bin/curl"}},
                                  {"destination",
                                   {"connect tcp 10.0.0.5:443", "connect tcp 10.1.2.3:8443", "connect unix stream /run/app/ctl.sock"}},
                                  {"wall_ms", 120}});
    auto out = profile_rules(profile, std::move(*flat), *compiled.bundle);
    INFO(out.text);
    INFO(out.entries.dump(1));

    // What happened to each allow, by rule.
    auto result = [&](std::string_view text) {
        const json* e = entry_of(out, text);
        return e ? (*e)["result"].get<std::string>() : std::string("(none)");
    };
    CHECK(result("files.read: /etc") == "narrowed");
    CHECK((*entry_of(out, "files.read: /etc"))["to"] == json::array({"/etc/ssl"}));
    CHECK(result("files.read: /usr/share/ca-certificates") == "kept");
    CHECK(result("files.read: /opt/tools") == "dropped");
    CHECK(result("files.write: ${workdir}") == "kept");
    CHECK(result("files.create: ${workdir}/out") == "kept");  // the area (the variable) is above it
    CHECK(result("exec.allow: /usr/bin") == "narrowed");
    CHECK(result("exec.allow: /bin/sh") == "kept");  // the tool's own binary, launched every run
    CHECK(result("network.dns: 127.0.0.53") == "dropped");
    CHECK(result("network.unix.connect: /run/app/") == "narrowed");
    CHECK(result("network.unix.connect: /run/other.sock") == "dropped");
    CHECK((*entry_of(out, "files.read: /etc"))["rule"] == "fetcher.yaml:4:10");
    CHECK(out.text.find("# narrowed from `files.read: /etc`: used in 3 of 3 learned runs") != std::string::npos);

    // The text compiles to rules no wider than the tool's.
    auto back = policy::compile_string(out.text, "exported.yaml", opts);
    INFO(policy::render_diagnostics(back));
    REQUIRE(back.ok());
    const auto& b = *back.bundle;
    CHECK(has_file(b, "/etc/ssl", BW_FS_READ));
    CHECK_FALSE(has_file(b, "/etc", BW_FS_READ));
    CHECK_FALSE(has_file(b, "/opt/tools", BW_FS_READ));
    CHECK(has_file(b, "/usr/bin/curl", BW_FS_EXEC));
    CHECK_FALSE(has_file(b, "/usr/bin", BW_FS_EXEC));
    // Denies stay, whatever was used.
    CHECK(std::any_of(b.files.begin(), b.files.end(),
                      [](const policy::FileRule& f) { return f.path == "/etc/shadow" && (f.deny & BW_FS_READ); }));
    // The address rules narrowed to the addresses, ports and protocols used;
    // the host name rule kept (resolved per task); the deny kept.
    size_t allows = 0, denies = 0, hosts = 0;
    for (const auto& r : b.network.rules) {
        if (r.action != BW_NET_ACTION_ALLOW) {
            ++denies;
            continue;
        }
        ++allows;
        if (r.host) {
            ++hosts;
            continue;
        }
        CHECK(r.prefix == 128);  // one address in the v6 space
        CHECK(r.port_lo == r.port_hi);
        CHECK(r.proto_mask == BW_PROTO_TCP);
    }
    CHECK(allows == 3);  // 10.0.0.5:443, 10.1.2.3:8443, the host name
    CHECK(hosts == 1);
    CHECK(denies == 1);
    REQUIRE(b.network.unix_rules.size() == 1);
    CHECK(b.network.unix_rules[0].address == "/run/app/ctl.sock");
    // The rest is the tool's own.
    CHECK(b.limits.timeout_ms == compiled.bundle->limits.timeout_ms);
    CHECK(b.limits.memory_bytes == compiled.bundle->limits.memory_bytes);
    auto names = [](const auto& list) {
        std::vector<std::string> n;
        for (const auto& [name, id] : list) n.push_back(name);
        return n;
    };
    CHECK(names(b.syscalls.deny) == names(compiled.bundle->syscalls.deny));
    CHECK(b.seccomp.program.size() == compiled.bundle->seccomp.program.size());
}

TEST_CASE("a profile as a rule file never lifts a block's restriction by emptying it", "[profiles][rules]") {
    auto opts = rules_options();
    const char* text = "tool: quiet\nbinaries: [/bin/sh]\nfiles:\n  read: [/opt/data]\nexec:\n  allow: [/usr/local/bin]\n";
    auto compiled = policy::compile_string(text, "quiet.yaml", opts);
    REQUIRE(compiled.ok());
    auto flat = policy::flatten_rule_string(text, "quiet.yaml", opts);
    REQUIRE(flat);
    // Runs that read nothing under /opt/data and executed nothing under
    // /usr/local/bin: dropping those entries would leave no files: or exec:
    // list, and nothing confined.
    auto out = profile_rules(learned({{"file_area", {"read /etc"}}, {"exec", {std::string(kLaunch)}}}), std::move(*flat),
                             *compiled.bundle);
    INFO(out.text);
    auto back = policy::compile_string(out.text, "exported.yaml", opts);
    REQUIRE(back.ok());
    CHECK(has_file(*back.bundle, "/opt/data", BW_FS_READ));
    CHECK(has_file(*back.bundle, "/usr/local/bin", BW_FS_EXEC));
    for (const auto& e : out.entries) {
        CHECK(e["result"] == "kept");
        CHECK(e["note"].get<std::string>().find("would lift the block's restriction") != std::string::npos);
    }
}

TEST_CASE("a profile as a rule file: an unused list of a confined block goes, an unused network goes to none",
          "[profiles][rules]") {
    auto opts = rules_options();
    const char* text = "tool: reader\nbinaries: [/bin/sh]\nfiles:\n  read: [\"${workdir}\"]\n  write: [\"${workdir}\"]\n"
                       "network:\n  connect: [{cidr: 10.0.0.0/8, ports: [443]}]\n";
    auto compiled = policy::compile_string(text, "reader.yaml", opts);
    REQUIRE(compiled.ok());
    auto flat = policy::flatten_rule_string(text, "reader.yaml", opts);
    REQUIRE(flat);
    auto out = profile_rules(learned({{"file_area", {"read ${workdir}"}}}), std::move(*flat), *compiled.bundle);
    INFO(out.text);
    auto back = policy::compile_string(out.text, "exported.yaml", opts);
    INFO(policy::render_diagnostics(back));
    REQUIRE(back.ok());
    CHECK(has_file(*back.bundle, "${workdir}", BW_FS_READ));
    CHECK_FALSE(has_file(*back.bundle, "${workdir}", BW_FS_WRITE));  // reads only: the block stays confined
    CHECK(back.bundle->network.mode == policy::NetMode::None);
    CHECK(compiled.bundle->network.mode == policy::NetMode::Rules);
}
