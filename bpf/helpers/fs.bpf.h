/* File decisions by object, not by path string: walk the dentry's true
 * ancestors (d_parent up to its filesystem's root, then across to the mount
 * point when that mount shows the whole filesystem) and look up
 * (policy, dev, ino) of each. A file reached through a bind alias is judged
 * by where it really lives. allow and deny are unions over the
 * ancestors; deny wins. A walk deeper than BW_PATH_WALK_MAX fails closed. */
#ifndef BULWARK_FS_BPF_H
#define BULWARK_FS_BPF_H

#include "sandbox.bpf.h"

#define BW_FS_CONTENT (BW_FS_READ | BW_FS_WRITE | BW_FS_EXEC)

struct bw_walk {
	__u32 allow;
	__u32 deny;
	__u32 allow_rule; /* nearest rule granting a requested right */
	__u32 deny_rule;  /* nearest rule denying a requested right */
	__u64 dev;        /* the object itself (first dentry walked) */
	__u64 ino;
	__s32 too_deep;
	__u32 pad;
};

#define BW_SB_MOUNTS_MAX 32 /* mounts of one superblock searched for the whole-filesystem one */

/* Kernels before 6.15 chain a superblock's mounts in a list_head
 * (sb->s_mounts, mount->mnt_instance); later ones in a singly linked list
 * (sb->s_mounts, mount->mnt_next_for_sb). CO-RE picks the layout at load. */
struct super_block___list {
	struct list_head s_mounts;
} __attribute__((preserve_access_index));
struct mount___list {
	struct list_head mnt_instance;
} __attribute__((preserve_access_index));

/* 1 when m shows the whole filesystem (root) and is mounted somewhere. */
static __always_inline int bw_mount_shows_root(struct mount *m, __u64 root_addr)
{
	if ((__u64)BPF_CORE_READ(m, mnt.mnt_root) != root_addr)
		return 0;
	struct mount *up = BPF_CORE_READ(m, mnt_parent);
	return up && up != m;
}

/* For a filesystem (super_block at sb_addr) whose root was reached through a
 * bind mount of one of its subdirectories: the mount that shows the whole filesystem
 * and is mounted somewhere, so the walk can go on above it; 0 when there is
 * none (the object's ancestors end here); 1 when the search bound ran out
 * (the caller fails closed). A global function: verified once, on its own. */
__noinline __u64 bw_whole_fs_mount(__u64 sb_addr)
{
	if (!sb_addr)
		return 0;
	__u64 root_addr = (__u64)BPF_CORE_READ((struct super_block *)sb_addr, s_root);
	if (bpf_core_field_exists(struct super_block___list, s_mounts) &&
	    bpf_core_field_exists(struct mount___list, mnt_instance)) {
		struct super_block___list *sb = (struct super_block___list *)sb_addr;
		struct list_head *head = &sb->s_mounts;
		struct list_head *pos = BPF_CORE_READ(sb, s_mounts.next);
		for (int i = 0; i < BW_SB_MOUNTS_MAX; i++) {
			if (!pos || pos == head)
				return 0;
			struct mount *m =
				(struct mount *)((void *)pos - bpf_core_field_offset(struct mount___list, mnt_instance));
			if (bw_mount_shows_root(m, root_addr))
				return (__u64)m;
			pos = BPF_CORE_READ(pos, next);
		}
		return 1;
	}
	if (bpf_core_field_exists(struct mount, mnt_next_for_sb)) {
		struct super_block *sb = (struct super_block *)sb_addr;
		struct mount *m = BPF_CORE_READ(sb, s_mounts);
		for (int i = 0; i < BW_SB_MOUNTS_MAX; i++) {
			if (!m)
				return 0;
			if (bw_mount_shows_root(m, root_addr))
				return (__u64)m;
			m = BPF_CORE_READ(m, mnt_next_for_sb);
		}
		return 1;
	}
	return 0;
}

/* Folds the rule of one ancestor (policy, dev, ino) into w; the lookup is
 * skipped when the policy's bloom says no rule names that inode. A global
 * function: verified once, so its branches do not multiply the states of the
 * walks' unrolled loops. */
__noinline int bw_walk_fold(struct bw_walk *w, __u64 dev, __u64 ino, __u32 policy_id, __u32 req)
{
	if (!w)
		return 0;
	const struct bw_file_bloom *bloom = bpf_map_lookup_elem(&bw_file_bloom, &policy_id);
	if (bloom) {
		__u64 h = bw_bloom_hash(dev, ino);
		__u32 b1 = bw_bloom_bit1(h), b2 = bw_bloom_bit2(h);
		if (!((bloom->words[b1 >> 6] >> (b1 & 63)) & 1) || !((bloom->words[b2 >> 6] >> (b2 & 63)) & 1))
			return 0;
	}
	struct bw_inode_key k = { .policy_id = policy_id, .dev = dev, .ino = ino };
	struct bw_file_rule *r = bpf_map_lookup_elem(&bw_file_rules, &k);
	if (!r)
		return 0;
	__u32 a = r->allow, dn = r->deny;
	if ((a & req) && w->allow_rule == BW_NO_RULE)
		w->allow_rule = r->allow_rule_id;
	if ((dn & req) && w->deny_rule == BW_NO_RULE)
		w->deny_rule = r->deny_rule_id;
	w->allow |= a;
	w->deny |= dn;
	return 0;
}

/* The rest of a walk: from the root of a filesystem (the dentry at root_addr,
 * already looked up by the caller) to where that filesystem is mounted, and
 * on upwards across mounts. A global function: verified once, on its own,
 * however many walks a program makes; dentries and mounts are scalars read
 * through BPF_CORE_READ here. Mount crossings need container_of on struct
 * mount, which the typed pointers of the first stretch do not allow. */
__noinline int bw_walk_mounts(struct bw_walk *w, __u64 root_addr, __u64 mount_addr, __u32 policy_id, __u32 req)
{
	if (!w)
		return 0;
	struct dentry *d = (struct dentry *)root_addr;
	struct mount *mnt = (struct mount *)mount_addr;
	for (int i = 0; i < BW_PATH_WALK_MAX; i++) {
		if (i > 0) {
			if (!d) {
				w->too_deep = 0;
				break;
			}
			struct inode *inode = BPF_CORE_READ(d, d_inode);
			if (inode) {
				bw_walk_fold(w, BPF_CORE_READ(inode, i_sb, s_dev), BPF_CORE_READ(inode, i_ino), policy_id, req);
			}
			struct dentry *parent = BPF_CORE_READ(d, d_parent);
			if (d != parent) {
				d = parent;
				continue;
			}
		}
		/* root of this filesystem: continue at its mount point. A bind mount
		 * of a subdirectory is an alias: the object's true ancestors go on
		 * where the whole filesystem is mounted (rules above that mount
		 * point cover it), never where the alias is (aliases gain nothing). */
		if (!mnt) {
			w->too_deep = 0;
			break;
		}
		if (BPF_CORE_READ(mnt, mnt.mnt_root) != d) {
			/* only the filesystem's own root continues (a disconnected
			 * dentry's ancestors end here) */
			struct super_block *sb = BPF_CORE_READ(d, d_sb);
			if ((struct dentry *)BPF_CORE_READ(sb, s_root) != d) {
				w->too_deep = 0;
				break;
			}
			__u64 whole = bw_whole_fs_mount((__u64)sb);
			if (whole == 1)
				break; /* search bound exhausted: fail closed (too_deep) */
			if (!whole) {
				w->too_deep = 0;
				break;
			}
			mnt = (struct mount *)whole;
		}
		struct mount *up = BPF_CORE_READ(mnt, mnt_parent);
		if (!up || up == mnt) {
			w->too_deep = 0;
			break;
		}
		d = BPF_CORE_READ(mnt, mnt_mountpoint);
		mnt = up;
	}
	return 0;
}

/* Walks from d (on vfsmount vmnt, or NULL: stay inside d's filesystem).
 *
 * d must be a typed kernel pointer (read from the hook's arguments by direct
 * access, not BPF_CORE_READ): the stretch from the object up to the root of
 * its own filesystem, where most walks end, is read with plain loads, which
 * the verifier turns into fault-safe loads with no helper call (five
 * bpf_probe_read_kernel calls a level fewer); bw_walk_mounts goes on from
 * there. Each of the two stretches has BW_PATH_WALK_MAX levels; one that runs
 * out fails closed (too_deep). */
static __noinline int bw_walk(__u32 policy_id, struct dentry *d, struct vfsmount *vmnt, __u32 req,
			      struct bw_walk *w)
{
	__u64 mnt = 0;
	if (vmnt)
		mnt = (__u64)vmnt - bpf_core_field_offset(struct mount, mnt);
	w->allow = 0;
	w->deny = 0;
	w->allow_rule = BW_NO_RULE;
	w->deny_rule = BW_NO_RULE;
	w->dev = 0;
	w->ino = 0;
	w->too_deep = 1;
	for (int i = 0; i < BW_PATH_WALK_MAX; i++) {
		if (!d) {
			w->too_deep = 0;
			return 0;
		}
		struct inode *inode = d->d_inode;
		if (inode) {
			__u64 dev = inode->i_sb->s_dev, ino = inode->i_ino;
			if (i == 0) {
				w->dev = dev;
				w->ino = ino;
			}
			bw_walk_fold(w, dev, ino, policy_id, req);
		}
		struct dentry *parent = d->d_parent;
		if (d == parent) /* the root, as a scalar (d is a typed pointer) */
			return bw_walk_mounts(w, (__u64)BPF_CORE_READ(d, d_parent), mnt, policy_id, req);
		d = parent;
	}
	return 0; /* too deep: fail closed */
}

/* Rights the policy gates (default deny) for this policy. Once any files
 * rule exists everything not covered is denied, exec included (files.exec is
 * a files right); an exec allow-list alone gates exec only. */
static __always_inline __u32 bw_gated(const struct bw_sbx *s)
{
	__u32 g = 0;
	if (s->flags & BW_POL_FILES_ENFORCED)
		g |= BW_FS_ALL;
	if (s->flags & BW_POL_EXEC_ENFORCED)
		g |= BW_FS_EXEC;
	return g;
}

/* Rights a walk grants (gated rights need an allow; deny always wins). */
static __always_inline __u32 bw_effective(const struct bw_sbx *s, const struct bw_walk *w)
{
	return (w->allow | ~bw_gated(s)) & ~w->deny & BW_FS_ALL;
}

/* 1 = would deny; *rule_id = the deciding rule. */
static __always_inline int bw_fs_judge(const struct bw_sbx *s, const struct bw_walk *w, __u32 req, __u32 *rule_id)
{
	*rule_id = BW_NO_RULE;
	if (!s->valid)
		return 1;
	if (w->too_deep) {
		struct bw_counters *c = bw_counters_get();
		if (c)
			c->walk_too_deep++;
		return 1;
	}
	if (req & w->deny) {
		*rule_id = w->deny_rule;
		return 1;
	}
	if (req & bw_gated(s) & ~w->allow)
		return 1;
	if (req & bw_gated(s))
		*rule_id = w->allow_rule;
	return 0;
}

static __always_inline void bw_emit_file(const struct bw_sbx *s, __u16 op, __u8 decision, __u32 rule_id,
					 const struct bw_walk *w, __u32 req, struct dentry *name_of)
{
	struct bw_event *e = bw_event_begin(s, BW_LAYER_BPF_LSM, op, decision, rule_id, BW_OBJ_FILE);
	if (!e)
		return;
	e->obj.file.dev = w->dev;
	e->obj.file.ino = w->ino;
	e->obj.file.rights = req;
	if (name_of) {
		const unsigned char *name = BPF_CORE_READ(name_of, d_name.name);
		bpf_probe_read_kernel_str(e->obj.file.path, sizeof(e->obj.file.path), name);
	}
	bw_event_submit(e);
}

/* Decides one file operation on the object at (d, mnt); returns -EPERM or 0. */
static __always_inline int bw_fs_decide(const struct bw_sbx *s, __u16 op, struct dentry *d, struct vfsmount *mnt,
					__u32 req)
{
	struct bw_walk w;
	__u32 rule_id;
	bw_walk(s->policy_id, d, mnt, req, &w);
	int would_deny = bw_fs_judge(s, &w, req, &rule_id);
	__u8 dec = bw_decide(s, would_deny);
	bw_rule_hit(s, rule_id);
	if (bw_reportable(s, dec))
		bw_emit_file(s, op, dec, rule_id, &w, req, d);
	return dec == BW_DECISION_DENY ? -EPERM : 0;
}

#endif /* BULWARK_FS_BPF_H */
