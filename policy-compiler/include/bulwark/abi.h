#pragma once
// C++ view of bpf/include/bulwark_abi.h: the layouts the BPF programs read are
// checked here at compile time, so a change on one side cannot drift silently.
#include <cstddef>

#include <bulwark_abi.h>

namespace bulwark::abi {

inline constexpr unsigned kVersion = BW_ABI_VERSION;

static_assert(sizeof(bw_binding) == 32);
static_assert(offsetof(bw_binding, policy_version) == 8);
static_assert(sizeof(bw_policy) == 32);
static_assert(offsetof(bw_policy, af_allow) == 16);
static_assert(sizeof(bw_inode_key) == 24);
static_assert(offsetof(bw_inode_key, dev) == 8 && offsetof(bw_inode_key, ino) == 16);
static_assert(sizeof(bw_file_rule) == 16);
static_assert(sizeof(bw_net_key) == 24);
static_assert(offsetof(bw_net_key, addr) == 8);
static_assert(sizeof(bw_port_range) == 12);
static_assert(sizeof(bw_net_rule) == 8 + 12 * BW_PORT_RANGES_MAX);
static_assert(sizeof(bw_rule_key) == 8);
static_assert(sizeof(bw_unix_key) == 120);
static_assert(offsetof(bw_unix_key, kind) == 8 && offsetof(bw_unix_key, name) == 9);
static_assert(sizeof(bw_unix_rule) == 16);
static_assert(sizeof(bw_event_unix) == 116);
static_assert(offsetof(bw_event_unix, family) == offsetof(bw_event_net, family));
static_assert(sizeof(bw_counters) == 8 * 8);
static_assert(sizeof(bw_run_usage) == 40 + 4 * BW_SYSCALL_SLOTS);
static_assert(sizeof(bw_event_file) == 24 + BW_EVENT_PATH_MAX);
static_assert(sizeof(bw_event_net) == 24);
static_assert(sizeof(bw_event_proc) == 16);
static_assert(offsetof(bw_event, comm) == 56);
static_assert(offsetof(bw_event, obj) == 72);
static_assert(sizeof(bw_event) == 72 + sizeof(bw_event_file));
static_assert(sizeof(bw_event) % 8 == 0);

// Kernel device number encoding used in bw_inode_key.dev (MKDEV of
// include/linux/kdev_t.h), from the major/minor that stat() reports.
constexpr unsigned long long kernel_dev(unsigned major, unsigned minor) {
    return (static_cast<unsigned long long>(major) << 20) | minor;
}

}  // namespace bulwark::abi
