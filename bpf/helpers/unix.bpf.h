/* Unix socket address decisions shared by the cgroup connect_unix /
 * sendmsg_unix programs (Linux 6.7+) and the LSM socket_connect /
 * socket_sendmsg / socket_bind hooks (where the BPF LSM loads): a sandboxed
 * task's connect, its sendmsg naming an address, and its bind, to a pathname
 * or abstract unix address is refused unless the policy's bw_unix_rules allow
 * that address for that operation.
 *
 * Both hooks run before the kernel looks the address up, so the decision is
 * on the address as written: a relative path, or one spelled with "//",
 * "/./", ".." or through a symlink, matches no rule (rules are absolute,
 * normalised paths) and is refused. A path with a ".." component matches no
 * rule, so a directory rule cannot be climbed out of. */
#ifndef BULWARK_UNIX_BPF_H
#define BULWARK_UNIX_BPF_H

#include "sandbox.bpf.h"

#define BW_AF_UNIX 1
#define BW_SUN_PATH_OFF 2 /* offsetof(struct sockaddr_un, sun_path) */

/* 1 when c == want, without a branch */
static __always_inline __u32 bw_byte_is(__u8 c, __u8 want)
{
	return 1 - ((((__u32)(__u8)(c ^ want)) + 0xff) >> 8);
}

/* 1 = would deny. k holds the address as an LPM key (kind 0: no usable address). */
static __always_inline int bw_unix_judge(const struct bw_sbx *s, struct bw_unix_key *k, int unmatchable,
					 __u8 op_bit, __u32 *rule_id)
{
	*rule_id = BW_NO_RULE;
	if (!s->valid || !(s->flags & BW_POL_UNIX_RULES) || k->kind == 0 || unmatchable)
		return 1;
	k->prefixlen = BW_UNIX_PREFIX_FULL;
	k->policy_id = s->policy_id;
	struct bw_unix_rule *r = bpf_map_lookup_elem(&bw_unix_rules, k);
	if (!r || !(r->op_mask & op_bit))
		return 1;
	*rule_id = op_bit == BW_NET_CONNECT ? r->connect_rule_id : op_bit == BW_NET_SEND ? r->send_rule_id : r->bind_rule_id;
	return 0;
}

/* Fills *k from a sockaddr_un of len bytes in kernel memory. Returns 1 when
 * the path has a ".." component (it matches no rule). A length outside
 * (2, 2 + sizeof(sun_path)] leaves kind 0, which every rule refuses. */
static __always_inline int bw_unix_key_from(struct bw_unix_key *k, const char *ua, __u32 len)
{
	if (len <= BW_SUN_PATH_OFF || len > BW_SUN_PATH_OFF + BW_UNIX_NAME_MAX)
		return 0;
	/* bounds the verifier can follow (clang folds the check above into one compare) */
	__u32 n = (len - BW_SUN_PATH_OFF) & 0x7f;
	asm volatile("" : "+r"(n));
	if (n > BW_UNIX_NAME_MAX)
		n = BW_UNIX_NAME_MAX;
	if (bpf_probe_read_kernel(k->name, n, ua + BW_SUN_PATH_OFF) < 0)
		return 0;
	if (k->name[0] == 0) {
		/* abstract: the length, then the bytes after the leading NUL (already in place) */
		k->kind = BW_UNIX_ABSTRACT;
		k->name[0] = (__u8)(n - 1);
		return 0;
	}
	/* pathname: up to the first NUL; clear the rest without a branch per byte */
	k->kind = BW_UNIX_PATH;
	__u8 keep = 0xff;
	for (int i = 0; i < BW_UNIX_NAME_MAX; i++) {
		__u8 c = k->name[i];
		keep &= (__u8)(0 - (((__u32)c + 0xff) >> 8));
		k->name[i] = c & keep;
	}
	/* a ".." component could climb out of a directory rule ("/run/app/../docker.sock") */
	__u32 dotdot = 0;
	for (int i = 0; i < BW_UNIX_NAME_MAX; i++)
		dotdot |= bw_byte_is(k->name[i], '/') & bw_byte_is(k->name[i + 1], '.') &
			  bw_byte_is(k->name[i + 2], '.') &
			  (bw_byte_is(k->name[i + 3], '/') | bw_byte_is(k->name[i + 3], 0));
	return dotdot;
}

/* 1 when the pathname key is below "/tmp/": the sandbox's private tmpfs,
 * where a tool may bind with no rule (its sockets are out of the host's
 * reach; Landlock grants the same there, policy/bpf_tables.h). */
static __always_inline int bw_unix_in_private_tmp(const struct bw_unix_key *k)
{
	return k->kind == BW_UNIX_PATH && k->name[0] == '/' && k->name[1] == 't' && k->name[2] == 'm' &&
	       k->name[3] == 'p' && k->name[4] == '/';
}

/* Judges a connect, a bind or an addressed send to the sockaddr_un at ua (kernel
 * memory, len bytes) for the sandbox s, counts the rule and reports the
 * decision as layer `layer`. Returns 1 when the operation is refused. */
static __always_inline int bw_unix_decide(const struct bw_sbx *s, __u16 layer, __u16 op, __u8 op_bit,
					  __u32 sock_type, const char *ua, __u32 len)
{
	struct bw_unix_key k;
	__builtin_memset(&k, 0, sizeof(k));
	int unmatchable = bw_unix_key_from(&k, ua, len);
	__u32 rule_id;
	int would_deny = bw_unix_judge(s, &k, unmatchable, op_bit, &rule_id);
	if (op_bit == BW_NET_BIND && s->valid && !unmatchable && bw_unix_in_private_tmp(&k))
		would_deny = 0;
	__u8 d = bw_decide(s, would_deny);
	bw_rule_hit(s, rule_id);
	if (bw_reportable(s, d)) {
		struct bw_event *e = bw_event_begin(s, layer, op, d, rule_id, BW_OBJ_UNIX);
		if (e) {
			e->obj.unx.family = BW_AF_UNIX;
			e->obj.unx.type = sock_type;
			e->obj.unx.kind = k.kind;
			if (k.kind == BW_UNIX_ABSTRACT) {
				__u16 n = k.name[0];
				if (n > BW_UNIX_NAME_MAX - 1)
					n = BW_UNIX_NAME_MAX - 1;
				e->obj.unx.len = n;
				__builtin_memcpy(e->obj.unx.name, k.name + 1, BW_UNIX_NAME_MAX - 1);
			} else {
				__u16 n = 0;
				for (int i = 0; i < BW_UNIX_NAME_MAX; i++)
					n += ((__u32)k.name[i] + 0xff) >> 8; /* 1 per byte before the first NUL */
				e->obj.unx.len = n;
				__builtin_memcpy(e->obj.unx.name, k.name, BW_UNIX_NAME_MAX);
			}
			bw_event_submit(e);
		}
	}
	return d == BW_DECISION_DENY;
}

#endif
