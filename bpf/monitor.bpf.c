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
#define BW_AT_FDCWD -100

/* Where a relative name is resolved from: the directory a descriptor
 * (openat's dirfd) or the working directory (AT_FDCWD, open, creat) is. */
static __always_inline int bw_base_dir(int dirfd, struct dentry **d, struct vfsmount **mnt)
{
	struct task_struct *t = bpf_get_current_task_btf();
	if (dirfd == BW_AT_FDCWD) {
		*d = BPF_CORE_READ(t, fs, pwd.dentry);
		*mnt = BPF_CORE_READ(t, fs, pwd.mnt);
		return *d != 0;
	}
	if (dirfd < 0)
		return 0;
	struct fdtable *fdt = BPF_CORE_READ(t, files, fdt);
	if (!fdt || (unsigned int)dirfd >= BPF_CORE_READ(fdt, max_fds))
		return 0;
	struct file **fds = BPF_CORE_READ(fdt, fd);
	struct file *f = 0;
	if (bpf_probe_read_kernel(&f, sizeof(f), &fds[dirfd]) || !f)
		return 0;
	*d = BPF_CORE_READ(f, f_path.dentry);
	*mnt = BPF_CORE_READ(f, f_path.mnt);
	return *d != 0;
}

/* A relative name made absolute: the base directory's path, built from its
 * dentries and mounts up to the root of the task's mount namespace (as the
 * tool sees its files), then the name. Built in a per-CPU scratch buffer:
 * the directory's components written backwards to end at BW_NAME_AT - 1, the
 * name at BW_NAME_AT. A path longer than the event holds keeps the name
 * whole and the directory's leading part (what areas and task variables are
 * judged by). */
#define BW_NAME_AT 512
#define BW_DIR_LEVELS 32
struct bw_path_scratch {
	char b[BW_NAME_AT + BW_EVENT_PATH_MAX + BW_NAME_AT];
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct bw_path_scratch);
} bw_path_scratch SEC(".maps");

struct bw_name {
	char path[BW_EVENT_PATH_MAX];
};

/* One step of the walk up from a directory: a component of its path
 * written in front of what is there, or a mount crossed. A global function,
 * verified once on its own; to the loop that calls it the walk's state is
 * memory it may have changed in any way, so the loop's states do not
 * multiply (an inlined walk's went past the verifier's limit). */
struct bw_dir_walk {
	__u64 dentry;
	__u64 mount; /* struct mount */
	__s32 pos;   /* the path so far starts here in the scratch */
	__s32 state; /* 0 walking, 1 at the namespace's root, -1 no path to say */
};

__noinline int bw_dir_step(struct bw_dir_walk *w)
{
	if (!w || w->state)
		return 0;
	__u32 zero = 0;
	struct bw_path_scratch *s = bpf_map_lookup_elem(&bw_path_scratch, &zero);
	if (!s) {
		w->state = -1;
		return 0;
	}
	struct dentry *d = (struct dentry *)w->dentry;
	struct mount *mnt = (struct mount *)w->mount;
	struct dentry *parent = BPF_CORE_READ(d, d_parent);
	struct dentry *root = BPF_CORE_READ(mnt, mnt.mnt_root);
	if (d == root) {
		struct mount *up = BPF_CORE_READ(mnt, mnt_parent);
		if (!up || up == mnt) {
			w->state = 1; /* the namespace's root */
			return 0;
		}
		w->dentry = (__u64)BPF_CORE_READ(mnt, mnt_mountpoint);
		w->mount = (__u64)up;
		return 0;
	}
	if (d == parent) {
		w->state = -1; /* a filesystem's root that is not its mount's: disconnected */
		return 0;
	}
	__u32 len = BPF_CORE_READ(d, d_name.len);
	int pos = w->pos;
	if (len == 0 || len > 255 || pos <= (int)len + 1 || pos >= BW_NAME_AT) {
		w->state = -1; /* longer than the scratch holds */
		return 0;
	}
	pos -= len;
	bpf_probe_read_kernel(&s->b[pos & (BW_NAME_AT - 1)], len & 255, BPF_CORE_READ(d, d_name.name));
	pos -= 1;
	s->b[pos & (BW_NAME_AT - 1)] = '/';
	w->pos = pos;
	w->dentry = (__u64)parent;
	return 0;
}

/* A global function too: `out_name` is the event's path, holding the name
 * as read from the tool (read once: the walk copies it from there);
 * `dentry`, `vfsmnt`: the directory's. */
__noinline int bw_absolute_name(struct bw_name *out_name, __u64 dentry, __u64 vfsmnt)
{
	if (!out_name || !dentry || !vfsmnt)
		return 0;
	char *out = out_name->path;
	__u32 zero = 0;
	struct bw_path_scratch *s = bpf_map_lookup_elem(&bw_path_scratch, &zero);
	if (!s)
		return 0;
	long n = bpf_probe_read_kernel_str(&s->b[BW_NAME_AT], BW_EVENT_PATH_MAX, out);
	if (n <= 1)
		return 0;
	s->b[BW_NAME_AT - 1] = '/';
	struct bw_dir_walk w = {
		.dentry = dentry,
		.mount = vfsmnt - bpf_core_field_offset(struct mount, mnt),
		.pos = BW_NAME_AT - 1, /* the directory ends here, with its '/' */
		.state = 0,
	};
	for (int i = 0; i < BW_DIR_LEVELS && !w.state; i++)
		bw_dir_step(&w);
	int pos = w.pos;
	if (w.state != 1 || pos < 1 || pos >= BW_NAME_AT)
		return 0; /* deeper than the walk goes, or no path: the name as given */
	/* pos: the leading '/'; the directory and its trailing '/' fill
	 * [pos, BW_NAME_AT), the name and its NUL n bytes from BW_NAME_AT (the
	 * working directory "/" itself: pos is BW_NAME_AT - 1). */
	int dir = BW_NAME_AT - pos, room = BW_EVENT_PATH_MAX - (int)n;
	if (dir > room) {
		/* keep the name: the directory's first `room` bytes moved up to it */
		if (room < 2)
			return 0;
		int from = pos & (BW_NAME_AT - 1), to = (BW_NAME_AT - room) & (BW_NAME_AT - 1);
		/* to > from and the stretch copied is room bytes, so the copy reads
		 * ahead of where it writes: through the event, not in place */
		bpf_probe_read_kernel(out, room & (BW_EVENT_PATH_MAX - 1), &s->b[from]);
		bpf_probe_read_kernel(&s->b[to], room & (BW_EVENT_PATH_MAX - 1), out);
		pos = to;
	}
	bpf_probe_read_kernel(out, BW_EVENT_PATH_MAX, &s->b[pos & (BW_NAME_AT - 1)]);
	out[BW_EVENT_PATH_MAX - 1] = 0;
	return 1;
}

/* What a counted run opens: one observation per open(2), openat(2),
 * openat2(2) or creat(2), on every host, BPF LSM or not. An absolute name is
 * recorded as the tool gave it; a relative one with the directory it is
 * relative to (the working directory, or openat's descriptor) put in front,
 * so that `cd /etc; cat passwd` and a walk by descriptors name where they
 * read. (A symlink or `..` on the way is the kernel's to resolve, after.)
 * The kernel has not judged the open yet: the record says what was asked. */
static __always_inline void bw_observe_open(const struct bw_sbx *s, struct pt_regs *regs, long id)
{
	const char *path;
	__u64 flags;
	int dirfd = BW_AT_FDCWD;
	if (id == BW_NR_OPENAT || id == BW_NR_OPENAT2) {
		dirfd = (int)PT_REGS_PARM1_CORE_SYSCALL(regs);
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
	else if (e->obj.file.path[0] != '/' && e->obj.file.path[0]) {
		struct dentry *dir;
		struct vfsmount *mnt;
		if (bw_base_dir(dirfd, &dir, &mnt))
			bw_absolute_name((struct bw_name *)e->obj.file.path, (__u64)dir, (__u64)mnt);
	}
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
