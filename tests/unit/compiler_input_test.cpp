// The bad-input battery: every malformed rule file fails the compile with a
// diagnostic, never a crash, a hang or a bundle that allows more.
#include "compiler_support.h"

using namespace bulwark::test;

TEST_CASE("empty and comment-only files are rejected", "[compiler][input]") {
    require_error("", "empty-file");
    require_error("   \n\n", "empty-file");
    require_error("# only a comment\n", "empty-file");
    require_error("~\n", "empty-file");
}

TEST_CASE("BOM, NUL bytes and invalid UTF-8 are rejected with a position", "[compiler][input]") {
    require_error("\xEF\xBB\xBFtool: curl\n", "bom");
    auto r = compile(std::string("tool: curl\ndescription: a\0b\n", 28));
    REQUIRE(has_code(r, "nul-byte"));
    CHECK(find_diag(r, "nul-byte")->loc.line == 2);
    CHECK(find_diag(r, "nul-byte")->loc.col == 15);
    auto u = compile("tool: curl\ndescription: caf\xc3\n");
    REQUIRE(has_code(u, "invalid-utf8"));
    CHECK(find_diag(u, "invalid-utf8")->loc.line == 2);
    require_error("tool: curl\nfiles: { read: [\"/etc/\xff\"] }\n", "invalid-utf8");
}

TEST_CASE("documents that are not a mapping are rejected", "[compiler][input]") {
    require_error("- tool\n", "wrong-type");
    require_error("just a string\n", "wrong-type");
    require_error("tool: [curl\n", "yaml-syntax");
    require_error("tool: curl\n  bad: indentation\n", "yaml-syntax");
}

TEST_CASE("deep nesting is bounded before yaml-cpp recurses", "[compiler][input]") {
    std::string flow = "tool: curl\ndescription: " + std::string(100000, '[') + std::string(100000, ']') + "\n";
    require_error(flow, "too-deep");
    std::string block = "tool: curl\n";
    for (int i = 0; i < 200; ++i) block += std::string(size_t(i) * 2, ' ') + "k" + std::to_string(i) + ":\n";
    require_error(block, "too-deep");
    std::string dashes = "tool: curl\nbinaries:\n  " ;
    for (int i = 0; i < 5000; ++i) dashes += "- ";
    dashes += "x\n";
    require_error(dashes, "too-deep");
    // A legitimate file nests about five levels.
    require_ok("tool: curl\nnetwork:\n  connect:\n    - cidr: 10.0.0.0/8\n      ports:\n        - 443\n");
}

TEST_CASE("huge files and huge strings are rejected", "[compiler][input]") {
    std::string big = "tool: curl\ndescription: x\n# " + std::string(5u << 20, 'a') + "\n";
    require_error(big, "file-too-large");
    require_error("tool: curl\nfiles: { read: [\"/" + std::string(5000, 'a') + "\"] }\n", "string-too-long");
    require_error("tool: curl\ndescription: " + std::string(2000, 'd') + "\n", "string-too-long");
}

TEST_CASE("alias expansion is bounded", "[compiler][input]") {
    // Billion-laughs shape: each level doubles through aliases.
    CompileOptions o = options();
    o.limits.max_nodes = 10000;
    std::string files = "tool: curl\nfiles:\n  read: &r [";
    for (int i = 0; i < 100; ++i) files += std::string(i ? ", " : "") + "/p" + std::to_string(i);
    files += "]\n  write: *r\n  create: *r\n  remove: *r\n";
    auto ok = compile_string(files, "t.yaml", o);
    CHECK(ok.ok());  // aliases of a flat list are fine
    o.limits.max_nodes = 150;
    auto r = compile_string(files, "t.yaml", o);
    CHECK(has_code(r, "too-many-nodes"));
    CHECK_FALSE(r.ok());
}

TEST_CASE("unknown keys are errors with did-you-mean", "[compiler][input]") {
    auto r = compile("tool: curl\nfiels:\n  read: [/etc]\n");
    REQUIRE(has_code(r, "unknown-key"));
    const auto* d = find_diag(r, "unknown-key");
    CHECK(d->message == "unknown key \"fiels\" at the top level");
    REQUIRE(d->hints.size() == 1);
    CHECK(d->hints[0] == "did you mean \"files\"?");
    require_error("tool: curl\nfiles: { raed: [/etc] }\n", "unknown-key");
    require_error("tool: curl\nnetwork: { connect: [{ cidr: 10.0.0.0/8, port: [443] }] }\n", "unknown-key");
    require_error("tool: curl\nlimits: { memroy: 1MiB }\n", "unknown-key");
    require_error("tool: curl\nsyscalls: { allow: [{ name: socket, args: [{ index: 0, op: eq, vale: 2 }] }] }\n",
                  "unknown-key");
}

TEST_CASE("duplicate keys are errors, not last-one-wins", "[compiler][input]") {
    auto r = compile("tool: curl\nfiles:\n  deny: [/etc/shadow]\n  read: [/etc]\n  deny: []\n");
    REQUIRE(has_code(r, "duplicate-key"));
    CHECK(find_diag(r, "duplicate-key")->loc.line == 5);
    require_error("tool: curl\ntool: wget\n", "duplicate-key");
    require_error("tool: curl\nnetwork: { connect: [{ cidr: 10.0.0.0/8, cidr: 0.0.0.0/0 }] }\n", "duplicate-key");
    require_error("tool: curl\nenvironment: { set: { A: x, A: y } }\n", "duplicate-key");
}

TEST_CASE("wrong types never compile to allow-all", "[compiler][input]") {
    require_error("tool: curl\nfiles: /etc\n", "wrong-type");
    require_error("tool: curl\nfiles:\n  read: /etc\n", "wrong-type");
    require_error("tool: curl\nfiles:\n  read:\n", "wrong-type");
    require_error("tool: curl\nfiles:\n", "wrong-type");
    require_error("tool: curl\nfiles:\n  deny: [{ path: /x, rights: read }]\n", "wrong-type");
    require_error("tool: curl\nfiles:\n  deny: [{ path: /x, rights: [] }]\n", "empty-list");
    require_error("tool: curl\nnetwork: 5\n", "bad-network");
    require_error("tool: curl\nnetwork: [none]\n", "wrong-type");
    require_error("tool: curl\nnetwork: { connect: 10.0.0.0/8 }\n", "wrong-type");
    require_error("tool: curl\nnetwork: { connect: [10.0.0.0/8] }\n", "wrong-type");
    require_error("tool: curl\nnetwork: { connect: [{ ports: [443] }] }\n", "missing-key");
    require_error("tool: curl\nnetwork: { connect: [{ cidr: 10.0.0.0/8, ports: [] }] }\n", "empty-list");
    require_error("tool: curl\nnetwork: { connect: [{ cidr: 10.0.0.0/8, ports: 443 }] }\n", "wrong-type");
    require_error("tool: curl\nsyscalls: [ptrace]\n", "wrong-type");
    require_error("tool: curl\nlimits: { memory: [1MiB] }\n", "wrong-type");
    require_error("tool: curl\nenvironment: { clear: yes }\n", "wrong-type");
    require_error("tool: [curl]\n", "wrong-type");
    require_error("description: no tool\n", "missing-key");
}

TEST_CASE("ports out of range or malformed are rejected", "[compiler][input]") {
    for (const char* p : {"65536", "-1", "\"70000\"", "\"80-70\"", "https", "443.0", "0x1bb", "\"1-99999\""}) {
        INFO(p);
        require_error(std::string("tool: curl\nnetwork: { connect: [{ cidr: 10.0.0.0/8, ports: [") + p + "] }] }\n",
                      "bad-port");
    }
}

TEST_CASE("bad paths are rejected, good ones normalised", "[compiler][input]") {
    require_error("tool: curl\nfiles: { read: [etc/passwd] }\n", "bad-path");
    require_error("tool: curl\nfiles: { read: [/etc/../root] }\n", "bad-path");
    require_error("tool: curl\nfiles: { read: [\"/home/*/.ssh\"] }\n", "bad-path");
    require_error("tool: curl\nfiles: { read: [\"/x/" + std::string(300, 'a') + "\"] }\n", "bad-path");
    require_error("tool: curl\nfiles: { read: [\"${wrokdir}/x\"] }\n", "unknown-variable");
    require_error("tool: curl\nfiles: { read: [\"/x${home}\"] }\n", "bad-path");
    require_error("tool: curl\nbinaries: [usr/bin/curl]\n", "bad-path");
    auto b = require_ok("tool: curl\nfiles: { read: [\"/etc//ssl/./\", \"${workdir}/\"] }\n");
    REQUIRE(b.files.size() == 2);
    CHECK(b.files[0].path == "/etc/ssl");
    CHECK(b.files[1].path == "${workdir}");
}

TEST_CASE("malformed addresses and hosts are rejected", "[compiler][input]") {
    for (const char* c : {"10.0.0.1/33", "1.2.3", "010.0.0.1", "10.0.0.1/8", "300.1.1.1", "\"::1/200\""}) {
        INFO(c);
        require_error(std::string("tool: curl\nnetwork: { connect: [{ cidr: ") + c + " }] }\n", "bad-cidr");
    }
    require_error("tool: curl\nnetwork: { connect: [{ host: \"*.github.com\" }] }\n", "bad-host");
    require_error("tool: curl\nnetwork: { connect: [{ host: 1.2.3.4 }] }\n", "bad-host");
    require_error("tool: curl\nnetwork: { connect: [{ host: a.com, cidr: 1.2.3.4/32 }] }\n", "host-and-cidr");
    require_error("tool: curl\nnetwork: { dns: [127.0.0.053] }\n", "bad-address");
}

TEST_CASE("limits overflow and zero are rejected", "[compiler][input]") {
    require_error("tool: curl\nlimits: { memory: 99999999999999999999GiB }\n", "bad-limit");
    require_error("tool: curl\nlimits: { memory: 20000000000GiB }\n", "bad-limit");
    require_error("tool: curl\nlimits: { memory: 0MiB }\n", "zero-limit");
    require_error("tool: curl\nlimits: { pids: 0 }\n", "zero-limit");
    require_error("tool: curl\nlimits: { pids: 5000000 }\n", "bad-limit");
    require_error("tool: curl\nlimits: { pids: -1 }\n", "bad-limit");
    require_error("tool: curl\nlimits: { timeout: 30 }\n", "bad-limit");
    require_error("tool: curl\nlimits: { cpu: 50 }\n", "bad-limit");
    require_error("tool: curl\nlimits: { open_files: 1.5 }\n", "bad-limit");
}

TEST_CASE("every error withholds the bundle", "[compiler][input]") {
    auto r = compile("tool: curl\nfiles: { read: [/etc] }\nlimits: { pids: 0 }\n");
    CHECK_FALSE(r.ok());
    CHECK(count_errors(r.diagnostics) == 1);
}

TEST_CASE("errors are collected across sections", "[compiler][input]") {
    auto r = compile("tool: curl\nmode: enforcee\nlimits: { pids: 0 }\nhardening: { mte: fast }\n");
    CHECK(has_code(r, "bad-mode"));
    CHECK(has_code(r, "zero-limit"));
    CHECK(has_code(r, "bad-value"));
}
