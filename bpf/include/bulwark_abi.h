/* Bulwark kernel/userspace ABI.
 *
 * Every struct and constant shared between the BPF programs (bpf/<hook>.bpf.c), the
 * policy compiler's map emitters and agentd's loader and ring-buffer reader is
 * declared here, once. Rules for this file:
 *   - fixed-width __u8..__u64 fields only; no bool, pointers or enum-typed fields;
 *   - explicit padding, every struct a multiple of 8 bytes;
 *   - C++ users static_assert sizes and offsets (policy-compiler/include/bulwark/abi.h);
 *   - bump BW_ABI_VERSION on any layout change.
 */
#ifndef BULWARK_ABI_H
#define BULWARK_ABI_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define BW_ABI_VERSION 5

/* ---- capacities (a compile that needs more fails; nothing is truncated) ---- */
#define BW_MAX_SANDBOXES     4096   /* live sandbox cgroups */
#define BW_MAX_POLICIES      1024   /* policy slots (bundle x epoch) loaded at once */
#define BW_MAX_FILE_RULES    65536  /* (policy, inode) entries over all slots */
#define BW_MAX_NET_RULES     65536  /* (policy, prefix) entries over all slots */
#define BW_MAX_RULE_HITS     65536
#define BW_PORT_RANGES_MAX   16     /* port ranges per (policy, prefix) entry */
#define BW_PATH_WALK_MAX     64     /* dentry ancestors walked; deeper fails closed */
#define BW_EVENT_PATH_MAX    128
#define BW_RINGBUF_BYTES     (4u << 20)  /* a ring created by the loader; one already pinned keeps
                                           its size (the loader adopts it) */
#define BW_RINGBUF_WAKEUP_BYTES (256u << 10) /* bulk (allow/observe) records wake the reader only
                                                past this much unread data; denials wake it at once */
#define BW_NO_RULE           0xffffffffu /* rule_id when no rule matched (default) */
#define BW_CGROUP_NEST_MAX   8      /* cgroup levels below a sandbox leaf still judged as it */
#define BW_MAX_UNIX_RULES    16384  /* (policy, unix address) entries over all slots */

/* ---- enforcement layers (bw_event.layer, audit store "layer") ---- */
#define BW_LAYER_NONE        0
#define BW_LAYER_BPF_LSM     1
#define BW_LAYER_SOCK_ADDR   2  /* cgroup connect/sendmsg/bind programs */
#define BW_LAYER_SOCK_CREATE 3  /* cgroup sock_create program */
#define BW_LAYER_MONITOR     4  /* tracepoints: observe only */
#define BW_LAYER_SECCOMP     5
#define BW_LAYER_LANDLOCK    6
#define BW_LAYER_SUPERVISOR  7  /* agentd's own checks (binary, posture, limits) */
#define BW_LAYER_NAMESPACE   8
#define BW_LAYER_CGROUP      9  /* resource limits */
#define BW_LAYER_SOCK_UNIX   10 /* cgroup connect_unix/sendmsg_unix programs (Linux 6.7+) */

/* ---- operations (bw_event.op) ---- */
#define BW_OP_NONE          0
#define BW_OP_FILE_OPEN     1
#define BW_OP_FILE_CREATE   2
#define BW_OP_FILE_UNLINK   3
#define BW_OP_FILE_RENAME   4
#define BW_OP_FILE_LINK     5
#define BW_OP_FILE_TRUNCATE 6
#define BW_OP_EXEC          7
#define BW_OP_MMAP_EXEC     8
#define BW_OP_PTRACE        9
#define BW_OP_SIGNAL        10
#define BW_OP_MOUNT         11
#define BW_OP_BPF           12
#define BW_OP_SOCK_CREATE   13
#define BW_OP_CONNECT       14
#define BW_OP_BIND          15
#define BW_OP_SENDMSG       16
#define BW_OP_PROC_EXEC     17  /* monitor: sched_process_exec */
#define BW_OP_PROC_FORK     18
#define BW_OP_PROC_EXIT     19
#define BW_OP_SYSCALL       20
#define BW_OP_MKDIR         21
#define BW_OP_FILE_SETATTR  22  /* chmod, chown (needs write; setuid/setgid bits always denied) */
#define BW_OP_MAX           23

/* ---- decisions ---- */
#define BW_DECISION_ALLOW   0
#define BW_DECISION_DENY    1
#define BW_DECISION_AUDIT   2  /* would be denied; allowed because the policy is in audit mode */
#define BW_DECISION_OBSERVE 3  /* monitor record, no decision taken */

/* ---- policy modes ---- */
#define BW_MODE_ENFORCE 0
#define BW_MODE_AUDIT   1

/* ---- file rights (bw_file_rule.allow/deny, bw_event.rights) ---- */
#define BW_FS_READ    (1u << 0)
#define BW_FS_WRITE   (1u << 1)  /* write, append, truncate */
#define BW_FS_CREATE  (1u << 2)  /* new files, dirs, links, rename targets */
#define BW_FS_REMOVE  (1u << 3)  /* unlink, rmdir, rename sources */
#define BW_FS_EXEC    (1u << 4)  /* execve, mmap PROT_EXEC */
#define BW_FS_ALL     (BW_FS_READ | BW_FS_WRITE | BW_FS_CREATE | BW_FS_REMOVE | BW_FS_EXEC)

/* ---- network ---- */
#define BW_NET_CONNECT (1u << 0)
#define BW_NET_BIND    (1u << 1)
#define BW_NET_SEND    (1u << 2)  /* unconnected sendto/sendmsg */
#define BW_PROTO_TCP   (1u << 0)
#define BW_PROTO_UDP   (1u << 1)
#define BW_NET_ACTION_ALLOW 0
#define BW_NET_ACTION_DENY  1

/* ---- bw_policy.flags ---- */
#define BW_POL_FILES_ENFORCED (1u << 0) /* file rules present: default deny for files */
#define BW_POL_EXEC_ENFORCED  (1u << 1) /* exec allow-list present: default deny for exec */
#define BW_POL_NET_NONE       (1u << 2) /* no network at all */
#define BW_POL_NET_LOOPBACK   (1u << 3) /* loopback only */
#define BW_POL_NET_RULES      (1u << 4) /* decided by bw_net_rules */
#define BW_POL_DENY_PTRACE    (1u << 5) /* ptrace/signals outside the sandbox denied */
#define BW_POL_DENY_MOUNT     (1u << 6)
#define BW_POL_DENY_BPF       (1u << 7)
#define BW_POL_REPORT_ALLOW   (1u << 8) /* also emit events for allowed decisions */
#define BW_POL_TRACE_PROC     (1u << 9) /* monitor: exec/fork/exit events */
#define BW_POL_TRACE_SYSCALLS (1u << 10)/* monitor: one event per syscall entry */
#define BW_POL_UNIX_RULES     (1u << 11)/* unix addresses allowed by bw_unix_rules (else none is) */
#define BW_POL_COUNT_USAGE    (1u << 12)/* monitor: the run's system calls and sent bytes counted in bw_run_usage */
#define BW_POL_NETLINK_LIST   (1u << 13)/* netlink sockets only with a protocol in bw_policy.netlink_allow */

/* ---- kernel attach types the build's UAPI headers may lack ----
 * bpf_attach_type values of the cgroup unix socket hooks (Linux 6.7+, UAPI,
 * stable). The loader checks them against the running kernel's BTF before it
 * uses them; a kernel without them leaves the unix programs unavailable. */
#define BW_ATTACH_CGROUP_UNIX_CONNECT 49 /* BPF_CGROUP_UNIX_CONNECT */
#define BW_ATTACH_CGROUP_UNIX_SENDMSG 50 /* BPF_CGROUP_UNIX_SENDMSG */

/* Map: bw_sandboxes, HASH, key = cgroup v2 id (__u64), value = bw_binding.
 * Switching a subtask's policy is one update of this value (policy_id and
 * version together), so no operation ever sees neither policy. */
/* bw_binding.flags */
#define BW_BIND_SETUP (1u << 0) /* the run's tool has not executed yet: the LSM hooks let the
                                 * sandbox's own setup (its mounts, pivot_root, sysctl writes)
                                 * through; the first exec the policy allows (bprm_check, the
                                 * verified binary) clears it. The canary binds without it. */

struct bw_binding {
	__u32 policy_id;      /* slot in bw_policies */
	__u32 flags;          /* BW_BIND_* */
	__u64 policy_version; /* stamped on every event */
	__u64 task_id;
	__u64 run_id;
};

/* Map: bw_policies, ARRAY[BW_MAX_POLICIES], key = policy_id (__u32).
 * A binding is honoured only while bw_policy.version == bw_binding.policy_version:
 * a freed or reloaded slot denies everything for stale bindings (fail closed). */
struct bw_policy {
	__u64 version;        /* 0 = slot unused: every operation is denied */
	__u32 mode;           /* BW_MODE_* */
	__u32 flags;          /* BW_POL_* */
	__u64 af_allow;       /* bit n set: socket family n allowed (n < 64) */
	__u32 sock_type_allow;/* bit n set: SOCK_* type n allowed */
	__u32 netlink_allow;  /* with BW_POL_NETLINK_LIST: bit n set: netlink protocol n allowed (n < 32);
	                       * without it every protocol (0 in policies written before the field) */
};

/* Map: bw_file_rules, HASH, key = bw_inode_key, value = bw_file_rule.
 * dev uses the kernel's encoding (major << 20 | minor), not stat()'s st_dev.
 * The LSM walks the dentry's ancestors: allow = union of ancestors' allow,
 * deny = union of ancestors' deny, effective = allow & ~deny. */
struct bw_inode_key {
	__u32 policy_id;
	__u32 pad0;
	__u64 dev;
	__u64 ino;
};

struct bw_file_rule {
	__u32 allow;          /* BW_FS_* */
	__u32 deny;           /* BW_FS_* */
	__u32 allow_rule_id;  /* rule that granted (first in source order) */
	__u32 deny_rule_id;   /* rule that denied */
};

/* Map: bw_file_bloom, ARRAY[BW_MAX_POLICIES], key = policy_id (__u32),
 * value = bw_file_bloom. Every (dev, ino) key of the slot's bw_file_rules
 * entries sets two bits; a path walk looks an ancestor up in bw_file_rules
 * only when both of its bits are set. No false negatives (every key is in);
 * about 1% false positives at 1,000 rules. Written with the slot's rules,
 * before its header is published. */
#define BW_FILE_BLOOM_BITS 16384
struct bw_file_bloom {
	__u64 words[BW_FILE_BLOOM_BITS / 64];
};

/* The bloom's hash of one (dev, ino), shared by the programs and userspace. */
static inline __u64 bw_bloom_hash(__u64 dev, __u64 ino)
{
	__u64 h = ino * 0x9e3779b97f4a7c15ull ^ (dev + 1) * 0xc2b2ae3d27d4eb4full;
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 32;
	return h;
}
static inline __u32 bw_bloom_bit1(__u64 h) { return (__u32)h & (BW_FILE_BLOOM_BITS - 1); }
static inline __u32 bw_bloom_bit2(__u64 h) { return (__u32)(h >> 32) & (BW_FILE_BLOOM_BITS - 1); }

/* Map: bw_net_rules, LPM_TRIE, key = bw_net_key, value = bw_net_rule.
 * IPv4 is stored v4-mapped (::ffff:a.b.c.d); prefixlen counts the 32 bits of
 * policy_id too. The compiler copies every less specific prefix's ranges into
 * the more specific entries, so the longest match alone decides. */
struct bw_net_key {
	__u32 prefixlen;
	__u32 policy_id;      /* host order: its 32 bits are always matched whole */
	__u8  addr[16];
};

struct bw_port_range {
	__u16 lo;             /* host order, inclusive */
	__u16 hi;
	__u8  proto_mask;     /* BW_PROTO_* */
	__u8  op_mask;        /* BW_NET_* */
	__u8  action;         /* BW_NET_ACTION_* */
	__u8  pad0;
	__u32 rule_id;
};

struct bw_net_rule {
	__u32 count;          /* used entries of ranges[] */
	__u32 pad0;
	struct bw_port_range ranges[BW_PORT_RANGES_MAX];
};

/* Map: bw_unix_rules, LPM_TRIE, key = bw_unix_key, value = bw_unix_rule.
 * The address a sandboxed task connects or sends to (a connect, or a sendmsg
 * naming an address), or binds (the BPF LSM's socket_bind: no cgroup hook sees
 * a unix bind), as the kernel received it:
 *   - pathname: kind BW_UNIX_PATH, name = sun_path up to its first NUL (or the
 *     address length), then NUL bytes. A rule for one socket is the path and its
 *     NUL (prefixlen covers the NUL, so "/run/a.sock" never matches
 *     "/run/a.sock2"); a rule for every socket below a directory is the path
 *     with its trailing '/' and no NUL.
 *   - abstract: kind BW_UNIX_ABSTRACT, name[0] = the name's length (bytes after
 *     the leading NUL of sun_path, NULs inside included), then those bytes;
 *     rules match the length and every byte (prefixlen covers them).
 * prefixlen counts policy_id's 32 bits and kind's 8 too. The compiler copies
 * the ops of every less specific rule into the more specific entries, so the
 * longest match alone decides. Only allows exist: no match = refused. */
#define BW_UNIX_NAME_MAX   108  /* sizeof(sun_path) */
#define BW_UNIX_KEY_NAME   111  /* path + NUL, or length byte + abstract name */
#define BW_UNIX_PATH       1
#define BW_UNIX_ABSTRACT   2
#define BW_UNIX_PREFIX_FULL (32 + 8 + 8 * BW_UNIX_KEY_NAME)
struct bw_unix_key {
	__u32 prefixlen;
	__u32 policy_id;      /* host order: its 32 bits are always matched whole */
	__u8  kind;           /* BW_UNIX_* */
	__u8  name[BW_UNIX_KEY_NAME];
};

struct bw_unix_rule {
	__u32 op_mask;        /* BW_NET_CONNECT | BW_NET_SEND | BW_NET_BIND: allowed */
	__u32 connect_rule_id;/* rule that allows connect (BW_NO_RULE: none) */
	__u32 send_rule_id;   /* rule that allows an addressed send */
	__u32 bind_rule_id;   /* rule that allows a bind to the address */
};

/* Map: bw_rule_hits, PERCPU_HASH, key = bw_rule_key, value = __u64 hits. */
struct bw_rule_key {
	__u32 policy_id;
	__u32 rule_id;
};

/* Map: bw_stats, PERCPU_ARRAY[1], value = bw_counters. */
/* What the monitor counts of one run (map bw_run_usage, keyed by the run's
 * cgroup id) when its policy has BW_POL_COUNT_USAGE: its system calls by
 * number from its tool's exec on (the sandbox's own setup before it is not
 * the tool's; native ABI, calls through a compat ABI counted apart), and what it
 * sent (cgroup_skb egress of its sockets). agentd makes the entry when it
 * binds the run and takes it (reads, deletes it) when the run ends. */
#define BW_SYSCALL_SLOTS 512
struct bw_run_usage {
	__u64 executed;          /* the run's tool has executed: its system calls count from here */
	__u64 tx_bytes;
	__u64 tx_packets;
	__u64 compat_syscalls;   /* entries through a 32-bit ABI (x86: int 0x80, sysenter) */
	__u64 unknown_syscalls;  /* numbers at or past BW_SYSCALL_SLOTS */
	__u32 syscalls[BW_SYSCALL_SLOTS];
};

struct bw_counters {
	__u64 ringbuf_reserve_failures;
	__u64 events_emitted;
	__u64 decisions[4];      /* by BW_DECISION_* */
	__u64 walk_too_deep;     /* path walks that hit BW_PATH_WALK_MAX (denied) */
	__u64 unbound_policy;    /* sandbox bound to an unused slot (denied) */
};

/* Ring buffer record (map bw_events). */
#define BW_OBJ_NONE 0
#define BW_OBJ_FILE 1
#define BW_OBJ_NET  2
#define BW_OBJ_PROC 3
#define BW_OBJ_UNIX 4

struct bw_event_file {
	__u64 dev;
	__u64 ino;
	__u32 rights;            /* requested BW_FS_* */
	__u32 pad0;
	char  path[BW_EVENT_PATH_MAX]; /* best-effort name; the decision used (dev, ino) */
};

struct bw_event_net {
	__u16 family;
	__u16 type;
	__u16 protocol;
	__u16 port;              /* host order */
	__u8  addr[16];          /* v4 as v4-mapped */
};

struct bw_event_unix {
	__u16 family;            /* AF_UNIX (same offset as bw_event_net.family) */
	__u16 type;              /* SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET */
	__u8  kind;              /* BW_UNIX_PATH / BW_UNIX_ABSTRACT */
	__u8  pad0;
	__u16 len;               /* bytes of name used */
	char  name[BW_UNIX_NAME_MAX]; /* path (no NUL), or the abstract name without its leading NUL */
};

struct bw_event_proc {
	__u32 target_pid;
	__u32 arg;               /* signal number, ptrace mode, exit code, syscall nr */
	__u64 target_cgroup_id;
};

struct bw_event {
	__u64 ts_ns;             /* bpf_ktime_get_boot_ns() */
	__u64 cgroup_id;
	__u64 policy_version;
	__u32 policy_id;
	__u32 rule_id;           /* BW_NO_RULE when the default decided */
	__u32 pid;
	__u32 tgid;
	__u16 layer;             /* BW_LAYER_* */
	__u16 op;                /* BW_OP_* */
	__u8  decision;          /* BW_DECISION_* */
	__u8  obj_kind;          /* BW_OBJ_* */
	__u16 pad0;
	__s32 ret;               /* value returned to the kernel (0 or -errno) */
	__u32 pad1;
	char  comm[16];
	union {
		struct bw_event_file file;
		struct bw_event_net  net;
		struct bw_event_proc proc;
		struct bw_event_unix unx;
	} obj;
};

#endif /* BULWARK_ABI_H */
