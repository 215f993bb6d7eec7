// SPDX-License-Identifier: GPL-2.0
/* BPF LSM programs: files (by object: (dev, ino) of the dentry and its
 * ancestors, across mounts), exec and executable mappings, ptrace and
 * signals across the sandbox boundary, mounts, bpf(), and sockets.
 *
 * Namespace operations use the path_* hooks rather than inode_*: they carry
 * the vfsmount, so the ancestor walk crosses mount points and a rule on a
 * directory covers what is mounted below it, exactly as file_open sees it. */
#include "fs.bpf.h"
#include "net.bpf.h"
#include "unix.bpf.h"
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

#define BW_FMODE_READ 0x1
#define BW_FMODE_WRITE 0x2
#define BW_FMODE_EXEC 0x20
#define BW_FFLAGS_EXEC 0x20 /* __FMODE_EXEC */
#define BW_PROT_EXEC 0x4
#define BW_RENAME_EXCHANGE 0x2

/* ---- files ---- */

SEC("lsm/file_open")
int BPF_PROG(bw_file_open, struct file *file)
{
	struct bw_sbx s;
	if (!bw_lsm_sandbox(&s))
		return 0;
	__u32 fmode = file->f_mode;
	__u32 fflags = file->f_flags;
	__u32 req = 0;
	/* The kernel's own open of an executable (execve, uselib, the ELF
	 * interpreter) carries __FMODE_EXEC in f_flags; f_mode gains FMODE_EXEC
	 * only on some kernels (not 6.1). Judged as exec, not read. */
	if ((fflags & BW_FFLAGS_EXEC) || (fmode & BW_FMODE_EXEC)) {
		req = BW_FS_EXEC;
	} else {
		if (fmode & BW_FMODE_READ)
			req |= BW_FS_READ;
		if (fmode & BW_FMODE_WRITE)
			req |= BW_FS_WRITE;
	}
	if (!req)
		return 0;
	return bw_fs_decide(&s, BW_OP_FILE_OPEN, file->f_path.dentry, BPF_CORE_READ(file, f_path.mnt),
			    req);
}

SEC("lsm/path_truncate")
int BPF_PROG(bw_path_truncate, const struct path *path)
{
	struct bw_sbx s;
	if (!bw_lsm_sandbox(&s))
		return 0;
	return bw_fs_decide(&s, BW_OP_FILE_TRUNCATE, path->dentry, BPF_CORE_READ(path, mnt), BW_FS_WRITE);
}

/* Metadata changes need write on the object. Making a file setuid or setgid
 * is never a tool's business: denied whenever file rules are enforced. */
SEC("lsm/path_chmod")
int BPF_PROG(bw_path_chmod, const struct path *path, umode_t mode)
{
	struct bw_sbx s;
	if (!bw_lsm_sandbox(&s))
		return 0;
	if ((mode & (04000 | 02000)) && (s.flags & BW_POL_FILES_ENFORCED)) {
		struct bw_walk w = {};
		w.allow_rule = w.deny_rule = BW_NO_RULE;
		__u8 d = bw_decide(&s, 1);
		if (bw_reportable(&s, d))
			bw_emit_file(&s, BW_OP_FILE_SETATTR, d, BW_NO_RULE, &w, BW_FS_WRITE, BPF_CORE_READ(path, dentry));
		return d == BW_DECISION_DENY ? -EPERM : 0;
	}
	return bw_fs_decide(&s, BW_OP_FILE_SETATTR, path->dentry, BPF_CORE_READ(path, mnt), BW_FS_WRITE);
}

/* (uid and gid are by-value structs; only the path is read) */
SEC("lsm/path_chown")
int BPF_PROG(bw_path_chown, const struct path *path)
{
	struct bw_sbx s;
	if (!bw_lsm_sandbox(&s))
		return 0;
	return bw_fs_decide(&s, BW_OP_FILE_SETATTR, path->dentry, BPF_CORE_READ(path, mnt), BW_FS_WRITE);
}

/* New names are judged at their directory. */
static __always_inline int bw_create_in(const struct path *dir, __u16 op)
{
	struct bw_sbx s;
	if (!bw_lsm_sandbox(&s))
		return 0;
	return bw_fs_decide(&s, op, dir->dentry, BPF_CORE_READ(dir, mnt), BW_FS_CREATE);
}

SEC("lsm/path_mknod")
int BPF_PROG(bw_path_mknod, const struct path *dir, struct dentry *dentry, umode_t mode, unsigned int dev)
{
	return bw_create_in(dir, BW_OP_FILE_CREATE);
}

SEC("lsm/path_mkdir")
int BPF_PROG(bw_path_mkdir, const struct path *dir, struct dentry *dentry, umode_t mode)
{
	return bw_create_in(dir, BW_OP_MKDIR);
}

SEC("lsm/path_symlink")
int BPF_PROG(bw_path_symlink, const struct path *dir, struct dentry *dentry, const char *old_name)
{
	return bw_create_in(dir, BW_OP_FILE_CREATE);
}

/* Removals are judged at the object itself (rules on it apply). */
static __always_inline int bw_remove(const struct path *dir, struct dentry *dentry)
{
	struct bw_sbx s;
	if (!bw_lsm_sandbox(&s))
		return 0;
	return bw_fs_decide(&s, BW_OP_FILE_UNLINK, dentry, BPF_CORE_READ(dir, mnt), BW_FS_REMOVE);
}

SEC("lsm/path_unlink")
int BPF_PROG(bw_path_unlink, const struct path *dir, struct dentry *dentry)
{
	return bw_remove(dir, dentry);
}

SEC("lsm/path_rmdir")
int BPF_PROG(bw_path_rmdir, const struct path *dir, struct dentry *dentry)
{
	return bw_remove(dir, dentry);
}

/* Moving or linking an object across a rule boundary: the source must allow
 * removal (rename only), the destination directory creation, and the object
 * must not gain content rights (read, write, exec) it did not have. */
static __always_inline int bw_move(const struct bw_sbx *s, __u16 op, struct dentry *obj, struct vfsmount *obj_mnt,
				   struct dentry *dst_dir, struct vfsmount *dst_mnt, __u32 src_req)
{
	struct bw_walk src, dst;
	__u32 rule_src = BW_NO_RULE, rule_dst = BW_NO_RULE;
	/* Each walk is attributed for the right it decides (the nearest rule
	 * carrying that right), so a rule granting some other right nearer the
	 * object never takes the credit; the allow/deny unions the gain check
	 * needs do not depend on it. */
	bw_walk(s->policy_id, obj, obj_mnt, src_req, &src);
	bw_walk(s->policy_id, dst_dir, dst_mnt, BW_FS_CREATE, &dst);
	int deny = 0;
	__u32 rule_id = BW_NO_RULE;
	if (src_req && bw_fs_judge(s, &src, src_req, &rule_src)) {
		deny = 1;
		rule_id = rule_src;
	} else if (bw_fs_judge(s, &dst, BW_FS_CREATE, &rule_dst)) {
		deny = 1;
		rule_id = rule_dst;
	} else {
		__u32 gain = bw_effective(s, &dst) & ~bw_effective(s, &src) & BW_FS_CONTENT;
		if (gain) {
			/* the rule at the destination that grants what would be gained */
			struct bw_walk g;
			bw_walk(s->policy_id, dst_dir, dst_mnt, gain, &g);
			deny = 1;
			rule_id = g.allow_rule;
		} else {
			rule_id = rule_dst;
		}
	}
	__u8 dec = bw_decide(s, deny);
	bw_rule_hit(s, rule_id);
	if (bw_reportable(s, dec))
		bw_emit_file(s, op, dec, rule_id, &src, src_req | BW_FS_CREATE, obj);
	return dec == BW_DECISION_DENY ? -EPERM : 0;
}

SEC("lsm/path_rename")
int BPF_PROG(bw_path_rename, const struct path *old_dir, struct dentry *old_dentry, const struct path *new_dir,
	     struct dentry *new_dentry, unsigned int flags)
{
	struct bw_sbx s;
	if (!bw_lsm_sandbox(&s))
		return 0;
	struct vfsmount *om = BPF_CORE_READ(old_dir, mnt), *nm = BPF_CORE_READ(new_dir, mnt);
	int ret = bw_move(&s, BW_OP_FILE_RENAME, old_dentry, om, new_dir->dentry, nm, BW_FS_REMOVE);
	if (ret || !(flags & BW_RENAME_EXCHANGE))
		return ret;
	/* exchange: the target moves the other way too */
	return bw_move(&s, BW_OP_FILE_RENAME, new_dentry, nm, old_dir->dentry, om, BW_FS_REMOVE);
}

SEC("lsm/path_link")
int BPF_PROG(bw_path_link, struct dentry *old_dentry, const struct path *new_dir, struct dentry *new_dentry)
{
	struct bw_sbx s;
	if (!bw_lsm_sandbox(&s))
		return 0;
	/* a link never crosses a mount (EXDEV), so old_dentry lives on new_dir's mount */
	struct vfsmount *m = BPF_CORE_READ(new_dir, mnt);
	return bw_move(&s, BW_OP_FILE_LINK, old_dentry, m, new_dir->dentry, m, 0);
}

/* ---- code execution ---- */

SEC("lsm/bprm_check_security")
int BPF_PROG(bw_bprm_check, struct linux_binprm *bprm)
{
	struct bw_sbx s;
	if (!bw_sandbox(&s))
		return 0;
	struct file *f = bprm->file;
	int rc = bw_fs_decide(&s, BW_OP_EXEC, f->f_path.dentry, BPF_CORE_READ(f, f_path.mnt), BW_FS_EXEC);
	if (rc == 0 && s.valid && s.setup)
		bw_arm(&s);
	return rc;
}

SEC("lsm/mmap_file")
int BPF_PROG(bw_mmap_file, struct file *file, unsigned long reqprot, unsigned long prot, unsigned long flags)
{
	if (!file || !(prot & BW_PROT_EXEC))
		return 0;
	struct bw_sbx s;
	if (!bw_lsm_sandbox(&s))
		return 0;
	return bw_fs_decide(&s, BW_OP_MMAP_EXEC, file->f_path.dentry, BPF_CORE_READ(file, f_path.mnt), BW_FS_EXEC);
}

SEC("lsm/file_mprotect")
int BPF_PROG(bw_file_mprotect, struct vm_area_struct *vma, unsigned long reqprot, unsigned long prot)
{
	if (!(prot & BW_PROT_EXEC))
		return 0;
	struct file *file = vma->vm_file;
	if (!file)
		return 0;
	struct bw_sbx s;
	if (!bw_lsm_sandbox(&s))
		return 0;
	return bw_fs_decide(&s, BW_OP_MMAP_EXEC, file->f_path.dentry, BPF_CORE_READ(file, f_path.mnt), BW_FS_EXEC);
}

/* ---- other processes ---- */

static __always_inline __u64 bw_task_cgid(struct task_struct *t)
{
	return BPF_CORE_READ(t, cgroups, dfl_cgrp, kn, id);
}

/* Reaching a task outside one's own sandbox cgroup. */
static __always_inline int bw_cross(struct task_struct *target, __u16 op, __u32 arg, __u32 flag)
{
	struct bw_sbx s;
	if (!bw_lsm_sandbox(&s))
		return 0;
	__u64 tcg = bw_task_cgid(target);
	int outside = tcg != s.cgid && tcg != bpf_get_current_cgroup_id();
	int would_deny = !s.valid || (outside && (s.flags & flag));
	__u8 d = bw_decide(&s, would_deny);
	if (bw_reportable(&s, d))
		bw_emit_proc(&s, BW_LAYER_BPF_LSM, op, d, BW_NO_RULE, BPF_CORE_READ(target, tgid), arg, tcg);
	return d == BW_DECISION_DENY ? -EPERM : 0;
}

SEC("lsm/ptrace_access_check")
int BPF_PROG(bw_ptrace_access, struct task_struct *child, unsigned int mode)
{
	return bw_cross(child, BW_OP_PTRACE, mode, BW_POL_DENY_PTRACE);
}

SEC("lsm/ptrace_traceme")
int BPF_PROG(bw_ptrace_traceme, struct task_struct *parent)
{
	return bw_cross(parent, BW_OP_PTRACE, 0, BW_POL_DENY_PTRACE);
}

SEC("lsm/task_kill")
int BPF_PROG(bw_task_kill, struct task_struct *p, struct kernel_siginfo *info, int sig, const struct cred *cred)
{
	return bw_cross(p, BW_OP_SIGNAL, (__u32)sig, BW_POL_DENY_PTRACE);
}

/* ---- mounts and bpf() ---- */

static __always_inline int bw_flagged(__u16 op, __u32 flag, __u32 arg)
{
	struct bw_sbx s;
	if (!bw_lsm_sandbox(&s))
		return 0;
	__u8 d = bw_decide(&s, !s.valid || (s.flags & flag));
	if (bw_reportable(&s, d))
		bw_emit_proc(&s, BW_LAYER_BPF_LSM, op, d, BW_NO_RULE, 0, arg, 0);
	return d == BW_DECISION_DENY ? -EPERM : 0;
}

SEC("lsm/sb_mount")
int BPF_PROG(bw_sb_mount, const char *dev_name, const struct path *path, const char *type, unsigned long flags,
	     void *data)
{
	return bw_flagged(BW_OP_MOUNT, BW_POL_DENY_MOUNT, (__u32)flags);
}

SEC("lsm/sb_umount")
int BPF_PROG(bw_sb_umount, struct vfsmount *mnt, int flags)
{
	return bw_flagged(BW_OP_MOUNT, BW_POL_DENY_MOUNT, (__u32)flags);
}

SEC("lsm/sb_pivotroot")
int BPF_PROG(bw_sb_pivotroot, const struct path *old_path, const struct path *new_path)
{
	return bw_flagged(BW_OP_MOUNT, BW_POL_DENY_MOUNT, 0);
}

SEC("lsm/move_mount")
int BPF_PROG(bw_move_mount, const struct path *from_path, const struct path *to_path)
{
	return bw_flagged(BW_OP_MOUNT, BW_POL_DENY_MOUNT, 0);
}

SEC("lsm/bpf")
int BPF_PROG(bw_bpf, int cmd, union bpf_attr *attr, unsigned int size)
{
	return bw_flagged(BW_OP_BPF, BW_POL_DENY_BPF, (__u32)cmd);
}

/* ---- sockets ---- */

SEC("lsm/socket_create")
int BPF_PROG(bw_socket_create, int family, int type, int protocol, int kern)
{
	if (kern)
		return 0;
	struct bw_sbx s;
	if (!bw_lsm_sandbox(&s))
		return 0;
	__u32 t = (__u32)type & 0xf; /* without SOCK_NONBLOCK / SOCK_CLOEXEC */
	__u32 f = (__u32)family;
	__u32 p = (__u32)protocol;
	int would_deny = !s.valid || f >= 64 || !(s.af_allow & (1ull << f)) || !(s.sock_type_allow & (1u << t)) ||
			 (f == AF_NETLINK && (s.flags & BW_POL_NETLINK_LIST) && (p >= 32 || !(s.netlink_allow & (1u << p))));
	__u8 d = bw_decide(&s, would_deny);
	if (bw_reportable(&s, d)) {
		struct bw_net_req r = {};
		r.family = f;
		r.type = t;
		r.protocol = protocol;
		bw_emit_net(&s, BW_LAYER_BPF_LSM, BW_OP_SOCK_CREATE, d, BW_NO_RULE, &r);
	}
	return d == BW_DECISION_DENY ? -EPERM : 0;
}

/* Fills r from a kernel sockaddr; 0 when it is not an IP address. */
static __always_inline int bw_req_from_sockaddr(struct bw_net_req *r, const void *sa, struct socket *sock)
{
	struct sockaddr_in6 a = {};
	if (bpf_probe_read_kernel(&a, sizeof(a), sa) < 0 &&
	    bpf_probe_read_kernel(&a, sizeof(struct sockaddr_in), sa) < 0)
		return 0;
	if (a.sin6_family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)&a;
		bw_addr_from_v4(r->addr, in->sin_addr.s_addr);
		r->port = bpf_ntohs(in->sin_port);
	} else if (a.sin6_family == AF_INET6) {
		__builtin_memcpy(r->addr, &a.sin6_addr, 16);
		r->port = bpf_ntohs(a.sin6_port);
	} else {
		return 0;
	}
	r->family = a.sin6_family;
	r->type = BPF_CORE_READ(sock, type);
	r->protocol = BPF_CORE_READ(sock, sk, sk_protocol);
	return 1;
}

/* A connect, bind or addressed send: IP addresses against the network rules,
 * unix addresses against the unix rules (connect and send as the cgroup unix
 * programs judge them; bind here alone), as the cgroup sock_addr programs
 * judge IP; other families are gated at socket_create. A unix bind names the
 * address as written, like a connect; an autobind (the address family alone:
 * the kernel picks an unused abstract name) claims no name and passes. A
 * pathname bind also creates a file, which path_mknod judges. */
static __always_inline int bw_sock_op(struct socket *sock, const void *sa, int len, __u16 op, __u8 op_bit)
{
	if (!sa)
		return 0;
	struct bw_sbx s;
	if (!bw_lsm_sandbox(&s))
		return 0;
	__u16 family = 0;
	if (bpf_probe_read_kernel(&family, sizeof(family), sa) < 0)
		return 0;
	if (family == BW_AF_UNIX) {
		if (op_bit == BW_NET_BIND && len == BW_SUN_PATH_OFF)
			return 0;
		return bw_unix_decide(&s, BW_LAYER_BPF_LSM, op, op_bit, BPF_CORE_READ(sock, type), sa, (__u32)len)
			       ? -EPERM
			       : 0;
	}
	struct bw_net_req r = {};
	if (!bw_req_from_sockaddr(&r, sa, sock))
		return 0;
	return bw_net_decide(&s, BW_LAYER_BPF_LSM, op, op_bit, &r) ? -EPERM : 0;
}

SEC("lsm/socket_connect")
int BPF_PROG(bw_socket_connect, struct socket *sock, struct sockaddr *address, int addrlen)
{
	return bw_sock_op(sock, address, addrlen, BW_OP_CONNECT, BW_NET_CONNECT);
}

SEC("lsm/socket_bind")
int BPF_PROG(bw_socket_bind, struct socket *sock, struct sockaddr *address, int addrlen)
{
	return bw_sock_op(sock, address, addrlen, BW_OP_BIND, BW_NET_BIND);
}

/* Unconnected sends name their destination in msg_name (a kernel copy). */
SEC("lsm/socket_sendmsg")
int BPF_PROG(bw_socket_sendmsg, struct socket *sock, struct msghdr *msg, int size)
{
	return bw_sock_op(sock, BPF_CORE_READ(msg, msg_name), BPF_CORE_READ(msg, msg_namelen), BW_OP_SENDMSG,
			  BW_NET_SEND);
}
