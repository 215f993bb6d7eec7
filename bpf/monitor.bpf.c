// SPDX-License-Identifier: GPL-2.0
/* Observation only: process exec/fork/exit and syscall entry of sandboxed
 * tasks, as BW_DECISION_OBSERVE events, and a run's system calls and sent
 * bytes counted per run. Gated per policy by BW_POL_TRACE_PROC /
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
static __always_inline void bw_count_syscall(__u64 cgid, long id)
{
	struct bw_run_usage *u = bpf_map_lookup_elem(&bw_run_usage, &cgid);
	if (!u || !u->executed)
		return;
	if (bw_in_compat_syscall()) {
		__sync_fetch_and_add(&u->compat_syscalls, 1);
		return;
	}
	if (id < 0 || id >= BW_SYSCALL_SLOTS) {
		__sync_fetch_and_add(&u->unknown_syscalls, 1);
		return;
	}
	__u32 i = (__u32)id & (BW_SYSCALL_SLOTS - 1);
	__sync_fetch_and_add(&u->syscalls[i], 1);
}

SEC("raw_tp/sys_enter")
int BPF_PROG(bw_sys_enter, struct pt_regs *regs, long id)
{
	struct bw_sbx s;
	if (!bw_sandbox(&s) || !s.valid || !(s.flags & (BW_POL_TRACE_SYSCALLS | BW_POL_COUNT_USAGE)))
		return 0;
	if (s.flags & BW_POL_COUNT_USAGE)
		bw_count_syscall(s.cgid, id);
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
