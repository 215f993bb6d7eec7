// SPDX-License-Identifier: GPL-2.0
/* Observation only: process exec/fork/exit and syscall entry of sandboxed
 * tasks, as BW_DECISION_OBSERVE events, and a run's system calls and sent
 * bytes counted per run with the files it opens observed. Gated per policy by BW_POL_TRACE_PROC /
 * BW_POL_TRACE_SYSCALLS / BW_POL_COUNT_USAGE; never blocks anything. */
#include "sandbox.bpf.h"
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

static __always_inline int bw_traced(struct bw_sbx *s, __u32 flag)
{
	return bw_sandbox(s) && s->valid && (s->flags & flag);
}

/* Raw tracepoints: no tracefs needed (perf-event tracepoints need its ids). */
SEC("raw_tp/sched_process_exec")
int BPF_PROG(bw_proc_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	struct bw_sbx s;
	if (!bw_sandbox(&s) || !s.valid)
		return 0;
	/* The run's first exec is its tool's: its system calls count from here. */
	if (s.flags & BW_POL_COUNT_USAGE) {
		struct bw_run_usage *u = bpf_map_lookup_elem(&bw_run_usage, &s.cgid);
		if (u && !u->executed)
			u->executed = 1;
	}
	if (!(s.flags & BW_POL_TRACE_PROC))
		return 0;
	bw_observe();
	struct bw_event *e = bw_event_begin(&s, BW_LAYER_MONITOR, BW_OP_PROC_EXEC, BW_DECISION_OBSERVE,
					    BW_NO_RULE, BW_OBJ_FILE);
	if (!e)
		return 0;
	const char *filename = BPF_CORE_READ(bprm, filename);
	bpf_probe_read_kernel_str(e->obj.file.path, sizeof(e->obj.file.path), filename);
	struct inode *ino = BPF_CORE_READ(bprm, file, f_inode);
	e->obj.file.dev = BPF_CORE_READ(ino, i_sb, s_dev);
	e->obj.file.ino = BPF_CORE_READ(ino, i_ino);
	e->obj.file.rights = BW_FS_EXEC;
	bw_event_submit(e);
	return 0;
}

/* New processes only (threads are not reported); runs in the parent. */
SEC("raw_tp/sched_process_fork")
int BPF_PROG(bw_proc_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 pid = BPF_CORE_READ(child, pid), tgid = BPF_CORE_READ(child, tgid);
	if (pid != tgid)
		return 0;
	struct bw_sbx s;
	if (!bw_traced(&s, BW_POL_TRACE_PROC))
		return 0;
	bw_observe();
	bw_emit_proc(&s, BW_LAYER_MONITOR, BW_OP_PROC_FORK, BW_DECISION_OBSERVE, BW_NO_RULE, pid, 0, s.cgid);
	return 0;
}

/* One event per process (thread-group leader), arg = its wait status code. */
SEC("raw_tp/sched_process_exit")
int BPF_PROG(bw_proc_exit, struct task_struct *p)
{
	__u64 pt = bpf_get_current_pid_tgid();
	if ((__u32)pt != (__u32)(pt >> 32))
		return 0;
	struct bw_sbx s;
	if (!bw_traced(&s, BW_POL_TRACE_PROC))
		return 0;
	bw_observe();
	__u32 code = BPF_CORE_READ(p, exit_code);
	bw_emit_proc(&s, BW_LAYER_MONITOR, BW_OP_PROC_EXIT, BW_DECISION_OBSERVE, BW_NO_RULE, (__u32)(pt >> 32),
		     code, s.cgid);
	return 0;
}

/* A task in a compat (32-bit) system call: its numbers are another ABI's. */
static __always_inline int bw_in_compat_syscall(void)
{
#if defined(__TARGET_ARCH_x86)
	struct task_struct *t = bpf_get_current_task_btf();
	return (BPF_CORE_READ(t, thread_info.status) & 0x0002 /* TS_COMPAT */) != 0;
#else
	return 0;
#endif
}

/* agentd made the run's entry when it bound the run (none: not counted). */
/* Counts one system call of a counted run; 1 when it was counted (the run's
 * tool has executed, native ABI). */
static __always_inline int bw_count_syscall(__u64 cgid, long id)
{
	struct bw_run_usage *u = bpf_map_lookup_elem(&bw_run_usage, &cgid);
	if (!u || !u->executed)
		return 0;
	if (bw_in_compat_syscall()) {
		__sync_fetch_and_add(&u->compat_syscalls, 1);
		return 0;
	}
	if (id < 0 || id >= BW_SYSCALL_SLOTS) {
		__sync_fetch_and_add(&u->unknown_syscalls, 1);
		return 1;
	}
	__u32 i = (__u32)id & (BW_SYSCALL_SLOTS - 1);
	__sync_fetch_and_add(&u->syscalls[i], 1);
	return 1;
}

#if defined(__TARGET_ARCH_x86)
#define BW_NR_OPEN 2
#define BW_NR_CREAT 85
#define BW_NR_OPENAT 257
#elif defined(__TARGET_ARCH_arm64)
#define BW_NR_OPEN -1
#define BW_NR_CREAT -1
#define BW_NR_OPENAT 56
#endif
#define BW_NR_OPENAT2 437
#define BW_O_ACCMODE 03
#define BW_O_CREAT 0100
#define BW_O_TRUNC 01000

/* What a counted run opens, as the tool named it (a relative name is
 * relative to its directory or descriptor): one observation per open(2),
 * openat(2), openat2(2) or creat(2), on every host, BPF LSM or not. The
 * kernel has not judged the open yet: the record says what was asked. */
static __always_inline void bw_observe_open(const struct bw_sbx *s, struct pt_regs *regs, long id)
{
	const char *path;
	__u64 flags;
	if (id == BW_NR_OPENAT || id == BW_NR_OPENAT2) {
		path = (const char *)PT_REGS_PARM2_CORE_SYSCALL(regs);
		if (id == BW_NR_OPENAT) {
			flags = PT_REGS_PARM3_CORE_SYSCALL(regs);
		} else {
			const void *how = (const void *)PT_REGS_PARM3_CORE_SYSCALL(regs);
			if (bpf_probe_read_user(&flags, sizeof(flags), how))
				flags = 0;
		}
	} else if (id == BW_NR_OPEN || id == BW_NR_CREAT) {
		path = (const char *)PT_REGS_PARM1_CORE_SYSCALL(regs);
		flags = id == BW_NR_CREAT ? (BW_O_CREAT | BW_O_TRUNC | 1) : PT_REGS_PARM2_CORE_SYSCALL(regs);
	} else {
		return;
	}
	bw_observe();
	struct bw_event *e = bw_event_begin(s, BW_LAYER_MONITOR, BW_OP_FILE_OPEN, BW_DECISION_OBSERVE, BW_NO_RULE,
					    BW_OBJ_FILE);
	if (!e)
		return;
	if (bpf_probe_read_user_str(e->obj.file.path, sizeof(e->obj.file.path), path) < 0)
		e->obj.file.path[0] = 0;
	e->obj.file.dev = 0;
	e->obj.file.ino = 0;
	__u32 rights = BW_FS_READ;
	if (flags & BW_O_ACCMODE)
		rights = (flags & BW_O_ACCMODE) == 1 ? BW_FS_WRITE : BW_FS_READ | BW_FS_WRITE;
	if (flags & BW_O_TRUNC)
		rights |= BW_FS_WRITE;
	if (flags & BW_O_CREAT)
		rights |= BW_FS_CREATE;
	e->obj.file.rights = rights;
	bw_event_submit(e);
}

SEC("raw_tp/sys_enter")
int BPF_PROG(bw_sys_enter, struct pt_regs *regs, long id)
{
	struct bw_sbx s;
	if (!bw_sandbox(&s) || !s.valid || !(s.flags & (BW_POL_TRACE_SYSCALLS | BW_POL_COUNT_USAGE)))
		return 0;
	if ((s.flags & BW_POL_COUNT_USAGE) && bw_count_syscall(s.cgid, id))
		bw_observe_open(&s, regs, id);
	if (!(s.flags & BW_POL_TRACE_SYSCALLS))
		return 0;
	bw_observe();
	__u64 pt = bpf_get_current_pid_tgid();
	bw_emit_proc(&s, BW_LAYER_MONITOR, BW_OP_SYSCALL, BW_DECISION_OBSERVE, BW_NO_RULE, (__u32)(pt >> 32),
		     (__u32)id, s.cgid);
	return 0;
}

/* What a run sends: every packet its sockets put out, counted on the run's
 * usage entry (only runs that have one: BW_POL_COUNT_USAGE). Never drops. */
SEC("cgroup_skb/egress")
int bw_egress(struct __sk_buff *skb)
{
	__u64 cg = bpf_skb_cgroup_id(skb);
	struct bw_run_usage *u = bpf_map_lookup_elem(&bw_run_usage, &cg);
	if (u) {
		__sync_fetch_and_add(&u->tx_bytes, skb->len);
		__sync_fetch_and_add(&u->tx_packets, 1);
	}
	return 1;
}
