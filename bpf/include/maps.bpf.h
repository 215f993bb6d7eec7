/* Every map the Bulwark BPF programs share, declared once.
 *
 * All maps are pinned by name under the loader's pin root (default
 * /sys/fs/bpf/bulwark), so lsm, sock_addr and monitor objects share one
 * instance of each and enforcement outlives the loader process. Layouts are
 * in bulwark_abi.h. */
#ifndef BULWARK_MAPS_BPF_H
#define BULWARK_MAPS_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "bulwark_abi.h"

/* cgroup v2 id of a sandbox leaf -> its policy binding */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, BW_MAX_SANDBOXES);
	__type(key, __u64);
	__type(value, struct bw_binding);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} bw_sandboxes SEC(".maps");

/* policy slot -> header (version 0 = unused: deny) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, BW_MAX_POLICIES);
	__type(key, __u32);
	__type(value, struct bw_policy);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} bw_policies SEC(".maps");

/* (policy, dev, ino) -> rights granted/denied on that subtree */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, BW_MAX_FILE_RULES);
	__type(key, struct bw_inode_key);
	__type(value, struct bw_file_rule);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} bw_file_rules SEC(".maps");

/* policy slot -> which (dev, ino) may have an entry in bw_file_rules */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, BW_MAX_POLICIES);
	__type(key, __u32);
	__type(value, struct bw_file_bloom);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} bw_file_bloom SEC(".maps");

/* (policy, v6 prefix) -> port ranges; longest prefix decides */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, BW_MAX_NET_RULES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct bw_net_key);
	__type(value, struct bw_net_rule);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} bw_net_rules SEC(".maps");

/* (policy, unix address or directory prefix) -> ops allowed; longest match decides */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, BW_MAX_UNIX_RULES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct bw_unix_key);
	__type(value, struct bw_unix_rule);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} bw_unix_rules SEC(".maps");

/* (policy, rule) -> hits, per CPU */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, BW_MAX_RULE_HITS);
	__type(key, struct bw_rule_key);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} bw_rule_hits SEC(".maps");

/* counters, per CPU; userspace sums them */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct bw_counters);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} bw_stats SEC(".maps");

/* cgroup id of a run -> what the monitor counted of it (BW_POL_COUNT_USAGE) */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, BW_MAX_SANDBOXES);
	__type(key, __u64);
	__type(value, struct bw_run_usage);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} bw_run_usage SEC(".maps");

/* decision and monitor records (struct bw_event) */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, BW_RINGBUF_BYTES);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} bw_events SEC(".maps");

#endif /* BULWARK_MAPS_BPF_H */
