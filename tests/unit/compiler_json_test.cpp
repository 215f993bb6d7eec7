// Canonical bundle JSON: round trip, hash stability, tamper detection.
#include "compiler_support.h"

using namespace bulwark::test;

namespace {
const char* kFull =
    "tool: curl\ndescription: fetch\nmode: audit\nmandatory: [seccomp]\n"
    "binaries: [/usr/bin/curl]\n"
    "files:\n  read: [/etc/ssl]\n  write: [\"${workdir}\"]\n  deny: [\"${home}/.ssh\"]\n"
    "exec: { allow: [/usr/bin/curl] }\n"
    "network:\n  connect:\n    - { host: api.github.com, ports: [443] }\n    - { cidr: 10.0.0.0/8, ports: [\"80-90\"] }\n"
    "  deny: [{ cidr: 10.1.0.0/16 }]\n  dns: [\"::1\"]\n"
    "syscalls: { allow: [personality], deny: [ptrace], architectures: [native, i386] }\n"
    "limits: { memory: 256MiB, timeout: 30s }\n"
    "hardening: { mte: async, require: [pie], speculation: { store_bypass: disable } }\n"
    "environment: { pass: [PATH], set: { HOME: \"${workdir}\" }, clear: true }\n";
}

TEST_CASE("bundle JSON round-trips exactly", "[compiler][json]") {
    Bundle b = require_ok(kFull);
    CHECK(b.hash.starts_with("sha256:"));
    CHECK(b.hash.size() == 7 + 64);
    auto j = bundle_to_json(b);
    auto back = bundle_from_json(j);
    REQUIRE(back.has_value());
    CHECK(canonical_dump(bundle_to_json(*back)) == canonical_dump(j));
    // back->hash is the JSON's field copied; the content's own hash is what proves the round trip.
    CHECK(bundle_hash(*back) == b.hash);
    // Through text too.
    auto reparsed = bundle_from_json(nlohmann::json::parse(canonical_dump(j)));
    REQUIRE(reparsed.has_value());
    CHECK(reparsed->bpf.net.size() == b.bpf.net.size());
    CHECK(reparsed->seccomp.program.size() == 1);
    CHECK(reparsed->seccomp.program[0].k == 0x7fff0000u);
    REQUIRE(reparsed->syscalls.architectures.size() == 2);
    CHECK(reparsed->syscalls.architectures[0].first == "native");
    CHECK(reparsed->syscalls.architectures[1].first == "i386");
    CHECK(reparsed->syscalls.architectures[1].second == b.syscalls.architectures[1].second);
}

TEST_CASE("the hash is stable and content-addressed", "[compiler][json]") {
    Bundle a = require_ok(kFull), b = require_ok(kFull);
    CHECK(a.hash == b.hash);
    // Formatting of the source does not matter beyond rule locations.
    std::string changed = kFull;
    changed.replace(changed.find("256MiB"), 6, "512MiB");
    CHECK(require_ok(changed).hash != a.hash);
    // A fixed bundle has a fixed hash (format stability).
    Bundle fixed;
    fixed.tool = "x";
    fixed.rules.push_back(RuleRef{0, {"x.yaml", 0, 0}, "(defaults)", "policy"});
    CHECK(bundle_hash(fixed) == bundle_hash(fixed));
    CHECK(canonical_dump(bundle_to_json(fixed)).find("\"tool\":\"x\"") != std::string::npos);
}

TEST_CASE("bundle_from_json rejects tampered and malformed bundles", "[compiler][json]") {
    auto j = bundle_to_json(require_ok(kFull));
    auto t = j;
    t["files"][0]["allow"] = 31;
    auto r = bundle_from_json(t);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().find("hash mismatch") != std::string::npos);
    auto m = j;
    m["mode"] = "permissive";
    CHECK_FALSE(bundle_from_json(m).has_value());
    auto f = j;
    f["format"] = 99;
    CHECK_FALSE(bundle_from_json(f).has_value());
    auto missing = j;
    missing.erase("landlock");
    CHECK_FALSE(bundle_from_json(missing).has_value());
    // Format 1 filters accepted i386 calls under the native rules: such a
    // bundle is refused, never read as native-only.
    auto v1 = j;
    v1["format"] = 1;
    v1["syscalls"].erase("architectures");
    CHECK(bundle_from_json(v1).error().find("bundle format 1") != std::string::npos);
    auto no_arches = j;
    no_arches["hash"] = "";
    no_arches["syscalls"].erase("architectures");
    CHECK_FALSE(bundle_from_json(no_arches).has_value());
    auto ranges = j;
    ranges["hash"] = "";
    auto& net = ranges["bpf"]["net"][0]["ranges"];
    while (net.size() <= BW_PORT_RANGES_MAX) net.push_back(net[0]);
    CHECK(bundle_from_json(ranges).error().find("BW_PORT_RANGES_MAX") != std::string::npos);
    auto dangling = j;
    dangling["hash"] = "";
    dangling["files"][0]["rule_id"] = 100000;
    CHECK(bundle_from_json(dangling).error().find("names no rule") != std::string::npos);
    CHECK_FALSE(bundle_from_json(nlohmann::json::array()).has_value());
}
