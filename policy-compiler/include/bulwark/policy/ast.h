#pragma once
// The rule file as parsed: structure and raw scalar values, each with its
// source span and the id of the rule (Bundle::rules) it belongs to. Meaning
// (paths, addresses, sizes ...) is given by the passes, not the parser.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bulwark/policy/bundle.h"

namespace bulwark::policy::ast {

struct Span {
    SourceLoc loc;
    uint32_t length = 1;
};

struct Scalar {
    std::string value;
    Span span;
    uint32_t rule_id = 0;
};

struct PathItem {
    Scalar path;
    uint32_t rights = BW_FS_ALL;   // deny entries: the rights denied
    uint32_t rule_id = 0;
    Span span;
    // deny entries: `unenforceable: run` written on the entry itself (a
    // file-wide one is RuleFile::unenforceable)
    bool unenforceable_run = false;
};

struct BinaryItem {
    Scalar path;
    std::optional<Scalar> sha256;
    std::optional<Scalar> libraries;  // auto | none
    uint32_t rule_id = 0;
};

struct NetItem {
    std::optional<Scalar> host, cidr, proto;
    std::vector<Scalar> ports;     // empty: every port
    uint32_t rule_id = 0;
    Span span;
    bool unenforceable_run = false;  // `unenforceable: run` written on the entry
};

struct ArgItem {
    Scalar index, op, value;
    std::optional<Scalar> mask;
    Span span;
};

struct SyscallItem {
    Scalar name;
    std::vector<ArgItem> args;
    std::optional<Scalar> action, errno_value;
    uint32_t rule_id = 0;
    Span span;
};

struct Files {
    bool present = false;
    Span span;
    std::vector<PathItem> read, write, create, remove, exec, deny;
};

struct Exec {
    bool present = false;
    Span span;
    std::vector<PathItem> allow;
};

struct Network {
    bool present = false;
    std::optional<Scalar> mode;    // "none" | "loopback"; absent with a mapping
    bool mapping = false;
    Span span;
    uint32_t rule_id = 0;
    std::vector<Scalar> families;
    std::vector<Scalar> netlink;  // netlink protocols (route, audit, ...) with netlink in families
    std::vector<NetItem> connect, bind, send, deny;
    std::vector<Scalar> dns;
    // network.unix: { connect: [...], send: [...], bind: [...] }: addresses, each its own rule
    std::vector<Scalar> unix_connect, unix_send, unix_bind;
    // network.unix.unenforceable: run: the unix rules written beside it and
    // the tool's unix defaults may run where no layer in force holds them
    std::optional<Scalar> unix_unenforceable;
};

struct Violation {
    Scalar action;
    std::optional<Scalar> errno_value;
    uint32_t rule_id = 0;
};

struct Syscalls {
    bool present = false;
    Span span;
    std::optional<Scalar> baseline;   // "default" | "none"
    std::optional<Scalar> import;     // baseline: { import: file.json }
    std::vector<SyscallItem> allow, deny;
    std::optional<Violation> on_violation;
    // ABIs whose system calls the rules judge: "native" and compat ABIs
    // ("i386", "arm"); absent means native only.
    bool has_architectures = false;
    Span architectures_span;
    std::vector<Scalar> architectures;
};

struct Hardening {
    bool present = false;
    std::optional<Scalar> mte;
    std::vector<Scalar> require, warn;
    std::optional<Scalar> store_bypass, indirect_branch;
    uint32_t rule_id = 0;
};

struct Environment {
    bool present = false;
    std::vector<Scalar> pass;
    std::vector<std::pair<Scalar, Scalar>> set;
    std::optional<Scalar> clear;
};

struct RuleFile {
    std::string file;
    std::optional<Scalar> tool, description, mode;
    std::vector<Scalar> extends;
    std::vector<Scalar> mandatory;
    // `unenforceable: run` at the top of this file (see coverage.h)
    std::optional<Scalar> unenforceable;
    std::vector<BinaryItem> binaries;
    Files files;
    Exec exec;
    Network network;
    Syscalls syscalls;
    std::vector<std::pair<std::string, Scalar>> limits;   // in source order
    std::vector<std::pair<std::string, Scalar>> microvm;  // mode, memory, vcpus, confidential
    std::vector<std::pair<std::string, Scalar>> profile;  // learn, respond
    Hardening hardening;
    Environment environment;
};

}  // namespace bulwark::policy::ast
