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

/* Walks from d (on vfsmount vmnt, or NULL: stay inside d's filesystem). */
static __noinline int bw_walk(__u32 policy_id, struct dentry *d, struct vfsmount *vmnt, __u32 req,
			      struct bw_walk *w)
{
	struct mount *mnt = NULL;
	if (vmnt)
		mnt = (struct mount *)((void *)vmnt - bpf_core_field_offset(struct mount, mnt));
	struct bw_inode_key k = { .policy_id = policy_id };
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
			break;
		}
		struct inode *inode = BPF_CORE_READ(d, d_inode);
		if (inode) {
			k.dev = BPF_CORE_READ(inode, i_sb, s_dev);
			k.ino = BPF_CORE_READ(inode, i_ino);
			if (i == 0) {
				w->dev = k.dev;
				w->ino = k.ino;
			}
			struct bw_file_rule *r = bpf_map_lookup_elem(&bw_file_rules, &k);
			if (r) {
				__u32 a = r->allow, dn = r->deny;
				if ((a & req) && w->allow_rule == BW_NO_RULE)
					w->allow_rule = r->allow_rule_id;
				if ((dn & req) && w->deny_rule == BW_NO_RULE)
					w->deny_rule = r->deny_rule_id;
				w->allow |= a;
				w->deny |= dn;
			}
		}
		struct dentry *parent = BPF_CORE_READ(d, d_parent);
		if (d == parent) {
			/* root of this filesystem: continue at its mount point only when the
			 * mount shows the whole filesystem; for a bind mount of a subdirectory
			 * the object's true ancestors are done (aliases gain nothing) */
			if (!mnt || BPF_CORE_READ(mnt, mnt.mnt_root) != d) {
				w->too_deep = 0;
				break;
			}
			struct mount *up = BPF_CORE_READ(mnt, mnt_parent);
			if (!up || up == mnt) {
				w->too_deep = 0;
				break;
			}
			d = BPF_CORE_READ(mnt, mnt_mountpoint);
			mnt = up;
			continue;
		}
		d = parent;
	}
	return 0;
}

/* Rights the policy gates (default deny) for this policy. */
static __always_inline __u32 bw_gated(const struct bw_sbx *s)
{
	__u32 g = 0;
	if (s->flags & BW_POL_FILES_ENFORCED)
		g |= BW_FS_READ | BW_FS_WRITE | BW_FS_CREATE | BW_FS_REMOVE;
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
