/* Sandbox identity, decisions, counters and events, shared by every program.
 *
 * Filter first: bw_sandbox() costs one helper call for tasks outside the
 * sandbox parent cgroup and they are allowed at once. Inside it, a task whose
 * cgroup (or an ancestor up to BW_CGROUP_NEST_MAX levels below the parent) is
 * not bound to a live policy is denied everything (fail closed). */
#ifndef BULWARK_SANDBOX_BPF_H
#define BULWARK_SANDBOX_BPF_H

#include "maps.bpf.h"
#include <bpf/bpf_core_read.h>

#ifndef EPERM
#define EPERM 1
#endif

/* Set by the loader between open and load. */
const volatile __u64 bw_root_cgid = 0;  /* cgroup v2 id of the sandbox parent */
const volatile __u32 bw_root_level = 0; /* its level in the v2 hierarchy (root = 0) */

struct bw_sbx {
	__u64 cgid;      /* the bound sandbox cgroup */
	__u64 version;   /* policy_version of the binding */
	__u32 policy_id;
	__u32 valid;     /* 1: the policy fields below are live */
	__u32 mode;
	__u32 flags;
	__u64 af_allow;
	__u32 sock_type_allow;
	__u32 netlink_allow;
	__u32 setup;     /* the binding's BW_BIND_SETUP: its tool has not executed yet */
};

static __always_inline struct bw_counters *bw_counters_get(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&bw_stats, &zero);
}

static __always_inline int bw_bind_policy(struct bw_sbx *s, __u64 cgid, struct bw_binding *b)
{
	s->cgid = cgid;
	/* A binding is read field by field; re-check the slot's version so a
	 * torn or stale read denies instead of mixing two policies. */
	for (int attempt = 0; attempt < 2; attempt++) {
		__u32 id = b->policy_id;
		__u64 ver = b->policy_version;
		s->setup = b->flags & BW_BIND_SETUP;
		s->policy_id = id;
		s->version = ver;
		struct bw_policy *p = bpf_map_lookup_elem(&bw_policies, &id);
		if (p && p->version != 0 && p->version == ver) {
			s->valid = 1;
			s->mode = p->mode;
			s->flags = p->flags;
			s->af_allow = p->af_allow;
			s->sock_type_allow = p->sock_type_allow;
			s->netlink_allow = p->netlink_allow;
			return 1;
		}
	}
	s->valid = 0;
	struct bw_counters *c = bw_counters_get();
	if (c)
		c->unbound_policy++;
	return 1;
}

/* 0: not a sandbox task (allow, no event). 1: sandbox task; s->valid says
 * whether a live policy applies (0: deny everything). */
static __always_inline int bw_sandbox(struct bw_sbx *s)
{
	__builtin_memset(s, 0, sizeof(*s));
	__u64 root = bw_root_cgid;
	__u32 level = bw_root_level;
	if (root == 0)
		return 0; /* loader did not configure a sandbox parent */
	if (bpf_get_current_ancestor_cgroup_id(level) != root)
		return 0;
	__u64 cg = bpf_get_current_cgroup_id();
	if (cg == root)
		return 0; /* the parent itself holds no tool */
	struct bw_binding *b = bpf_map_lookup_elem(&bw_sandboxes, &cg);
	if (b)
		return bw_bind_policy(s, cg, b);
	/* nested cgroups below a sandbox leaf: judged as the nearest bound ancestor */
	for (__u32 i = 1; i <= BW_CGROUP_NEST_MAX; i++) {
		__u64 id = bpf_get_current_ancestor_cgroup_id(level + i);
		if (id == 0 || id == cg)
			break;
		b = bpf_map_lookup_elem(&bw_sandboxes, &id);
		if (b)
			return bw_bind_policy(s, id, b);
	}
	s->cgid = cg;
	s->valid = 0;
	struct bw_counters *c = bw_counters_get();
	if (c)
		c->unbound_policy++;
	return 1;
}

/* would_deny -> ALLOW / DENY / AUDIT under the policy's mode; counts it. */
static __always_inline __u8 bw_decide(const struct bw_sbx *s, int would_deny)
{
	__u8 d = BW_DECISION_ALLOW;
	if (would_deny)
		d = (s->valid && s->mode == BW_MODE_AUDIT) ? BW_DECISION_AUDIT : BW_DECISION_DENY;
	struct bw_counters *c = bw_counters_get();
	if (c && d < 4)
		c->decisions[d]++;
	return d;
}

static __always_inline void bw_observe(void)
{
	struct bw_counters *c = bw_counters_get();
	if (c)
		c->decisions[BW_DECISION_OBSERVE]++;
}

static __always_inline int bw_reportable(const struct bw_sbx *s, __u8 d)
{
	return d != BW_DECISION_ALLOW || (s->flags & BW_POL_REPORT_ALLOW);
}

static __always_inline void bw_rule_hit(const struct bw_sbx *s, __u32 rule_id)
{
	if (rule_id == BW_NO_RULE || !s->valid)
		return;
	struct bw_rule_key k = { .policy_id = s->policy_id, .rule_id = rule_id };
	__u64 *v = bpf_map_lookup_elem(&bw_rule_hits, &k);
	if (v) {
		(*v)++;
		return;
	}
	__u64 one = 1;
	bpf_map_update_elem(&bw_rule_hits, &k, &one, BPF_NOEXIST);
}

/* Reserves and fills the common part of an event; NULL when the ring buffer
 * is full (counted). Enforcement never depends on this succeeding. */
static __always_inline struct bw_event *bw_event_begin(const struct bw_sbx *s, __u16 layer, __u16 op,
						       __u8 decision, __u32 rule_id, __u8 obj_kind)
{
	struct bw_counters *c = bw_counters_get();
	struct bw_event *e = bpf_ringbuf_reserve(&bw_events, sizeof(*e), 0);
	if (!e) {
		if (c)
			c->ringbuf_reserve_failures++;
		return NULL;
	}
	if (c)
		c->events_emitted++;
	__u64 pt = bpf_get_current_pid_tgid();
	e->ts_ns = bpf_ktime_get_boot_ns();
	e->cgroup_id = s->cgid;
	e->policy_version = s->version;
	e->policy_id = s->policy_id;
	e->rule_id = rule_id;
	e->pid = (__u32)pt;
	e->tgid = (__u32)(pt >> 32);
	e->layer = layer;
	e->op = op;
	e->decision = decision;
	e->obj_kind = obj_kind;
	e->pad0 = 0;
	e->ret = (decision == BW_DECISION_DENY) ? -EPERM : 0;
	e->pad1 = 0;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	__builtin_memset(&e->obj, 0, sizeof(e->obj));
	return e;
}

/* Denials and audits wake the reader at once (forced: unread bulk records
 * before them must not delay them); bulk records (allowed decisions, monitor
 * observations) wake it only once BW_RINGBUF_WAKEUP_BYTES are unread, so a busy
 * sandbox does not cost one wake-up per record. Readers poll with a timeout,
 * which bounds the latency of bulk records. */
static __always_inline void bw_event_submit(struct bw_event *e)
{
	__u64 flags = BPF_RB_FORCE_WAKEUP;
	if (e->decision == BW_DECISION_ALLOW || e->decision == BW_DECISION_OBSERVE)
		flags = bpf_ringbuf_query(&bw_events, BPF_RB_AVAIL_DATA) >= BW_RINGBUF_WAKEUP_BYTES ? BPF_RB_FORCE_WAKEUP
													   : BPF_RB_NO_WAKEUP;
	bpf_ringbuf_submit(e, flags);
}

/* An event whose object is a process (or nothing). */
static __always_inline void bw_emit_proc(const struct bw_sbx *s, __u16 layer, __u16 op, __u8 decision,
					 __u32 rule_id, __u32 target_pid, __u32 arg, __u64 target_cgid)
{
	struct bw_event *e = bw_event_begin(s, layer, op, decision, rule_id, BW_OBJ_PROC);
	if (!e)
		return;
	e->obj.proc.target_pid = target_pid;
	e->obj.proc.arg = arg;
	e->obj.proc.target_cgroup_id = target_cgid;
	bw_event_submit(e);
}

/* The LSM hooks' filter: as bw_sandbox(), but a live binding still in setup
 * (BW_BIND_SETUP) is the sandbox's own code before the tool's exec: let through. */
static __always_inline int bw_lsm_sandbox(struct bw_sbx *s)
{
	if (!bw_sandbox(s))
		return 0;
	return !(s->valid && s->setup);
}

/* The tool's first exec was allowed: the binding leaves setup. */
static __always_inline void bw_arm(const struct bw_sbx *s)
{
	__u64 cg = s->cgid;
	struct bw_binding *b = bpf_map_lookup_elem(&bw_sandboxes, &cg);
	/* Read-modify-write without an atomic (32-bit atomics need BPF v3): the
	 * only in-place writers are this same idempotent clear; a rebind by the
	 * loader replaces the whole element (armed). */
	if (b)
		b->flags = b->flags & ~BW_BIND_SETUP;
}

#endif /* BULWARK_SANDBOX_BPF_H */
