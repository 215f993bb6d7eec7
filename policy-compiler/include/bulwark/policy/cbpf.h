#pragma once
// A classic-BPF checker and interpreter for seccomp programs. The checker
// accepts exactly what the kernel accepts for SECCOMP_SET_MODE_FILTER
// (bpf_check_classic + seccomp_check_filter): length, opcode set, jump
// targets, scratch-memory initialisation, absolute loads aligned inside
// struct seccomp_data, a RET as the last instruction. The interpreter runs a
// program the way the kernel does, so tests can ask a compiled filter for its
// verdict on any (arch, nr, args) without installing it.
#include <linux/filter.h>
#include <linux/seccomp.h>

#include <cstddef>
#include <cstdint>
#include <expected>
#include <span>
#include <string>

namespace bulwark::policy {

struct CbpfError {
    size_t pc = 0;  // index of the offending instruction (length errors: 0)
    std::string message;
};

// Validates a program as the kernel would before installing it as a seccomp
// filter.
std::expected<void, CbpfError> check_seccomp_filter(std::span<const sock_filter> prog);

// Runs the program on one syscall and returns its SECCOMP_RET_* value (action
// and data). A program that check_seccomp_filter rejects yields
// SECCOMP_RET_KILL_PROCESS: a filter the kernel would refuse never allows.
// read_more (optional) is set when the run loaded anything past `arch` (the
// instruction pointer or an argument): only then can the answer for the
// same (nr, arch) differ with other values there.
uint32_t run_seccomp_filter(std::span<const sock_filter> prog, const seccomp_data& data, bool* read_more = nullptr);

// The socket families (bit n: family n) a filter lets `call` ("socket" or
// "socketpair") create on the native ABI: allowed or logged for any of the
// usual types, run through the interpreter as the kernel would
// (policy-compiler/src/seccomp_families.cpp).
uint64_t socket_families_through(std::span<const sock_filter> prog, const char* call);
// The netlink protocols (bit n: NETLINK_* n) a filter lets socket(2) open
// in the netlink family (raw and datagram sockets).
uint32_t netlink_protocols_through(std::span<const sock_filter> prog);

// Action part of a SECCOMP_RET_* value, and its data part (errno for ERRNO).
constexpr uint32_t seccomp_ret_action(uint32_t ret) { return ret & SECCOMP_RET_ACTION_FULL; }
constexpr uint32_t seccomp_ret_data(uint32_t ret) { return ret & SECCOMP_RET_DATA; }

}  // namespace bulwark::policy
