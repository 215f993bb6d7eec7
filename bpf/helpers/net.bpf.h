/* Network decisions shared by the cgroup sock_addr programs and the LSM
 * socket hooks: canonical v6 address space (IPv4 as ::ffff:a.b.c.d), one LPM
 * lookup, then the entry's port ranges in order (first match decides). */
#ifndef BULWARK_NET_BPF_H
#define BULWARK_NET_BPF_H

#include "sandbox.bpf.h"
#include <bpf/bpf_endian.h>

#ifndef AF_INET
#define AF_INET 2
#endif
#ifndef AF_INET6
#define AF_INET6 10
#endif
#ifndef AF_NETLINK
#define AF_NETLINK 16
#endif
#define BW_IPPROTO_TCP 6
#define BW_IPPROTO_UDP 17
#define BW_SOCK_STREAM 1
#define BW_SOCK_DGRAM 2

struct bw_net_req {
	__u8 addr[16];
	__u16 port;     /* host order */
	__u16 family;
	__u16 type;
	__u16 protocol;
};

static __always_inline void bw_addr_from_v4(__u8 *addr, __u32 ip_be)
{
	__builtin_memset(addr, 0, 10);
	addr[10] = 0xff;
	addr[11] = 0xff;
	__builtin_memcpy(addr + 12, &ip_be, 4);
}

static __always_inline int bw_addr_is_v4mapped(const __u8 *a)
{
	for (int i = 0; i < 10; i++)
		if (a[i])
			return 0;
	return a[10] == 0xff && a[11] == 0xff;
}

static __always_inline int bw_addr_is_zero(const __u8 *a, int from)
{
	for (int i = 0; i < 16; i++)
		if (i >= from && a[i])
			return 0;
	return 1;
}

/* Connecting or sending to the wildcard address reaches the local host:
 * judge it as loopback (0.0.0.0 -> 127.0.0.1, :: -> ::1). Bind keeps it. */
static __always_inline void bw_canonicalise(struct bw_net_req *r, __u8 op_bit)
{
	if (op_bit == BW_NET_BIND)
		return;
	if (bw_addr_is_v4mapped(r->addr)) {
		if (bw_addr_is_zero(r->addr, 12))
			r->addr[12] = 127, r->addr[15] = 1;
	} else if (bw_addr_is_zero(r->addr, 0)) {
		r->addr[15] = 1;
	}
}

static __always_inline int bw_addr_is_loopback(const __u8 *a)
{
	if (bw_addr_is_v4mapped(a))
		return a[12] == 127;
	for (int i = 0; i < 15; i++)
		if (a[i])
			return 0;
	return a[15] == 1;
}

static __always_inline __u8 bw_proto_bit(__u16 protocol)
{
	if (protocol == BW_IPPROTO_TCP)
		return BW_PROTO_TCP;
	if (protocol == BW_IPPROTO_UDP)
		return BW_PROTO_UDP;
	return 0;
}

/* 1 = would deny. *rule_id: the deciding rule or BW_NO_RULE. */
static __always_inline int bw_net_judge(const struct bw_sbx *s, const struct bw_net_req *r, __u8 op_bit,
					__u32 *rule_id)
{
	*rule_id = BW_NO_RULE;
	if (!s->valid || (s->flags & BW_POL_NET_NONE))
		return 1;
	if ((s->flags & BW_POL_NET_LOOPBACK) && bw_addr_is_loopback(r->addr))
		return 0;
	if (!(s->flags & BW_POL_NET_RULES))
		return 1;
	struct bw_net_key k = { .prefixlen = 32 + 128, .policy_id = s->policy_id };
	__builtin_memcpy(k.addr, r->addr, 16);
	struct bw_net_rule *rule = bpf_map_lookup_elem(&bw_net_rules, &k);
	if (!rule)
		return 1;
	__u8 proto = bw_proto_bit(r->protocol);
	__u32 n = rule->count;
	for (__u32 i = 0; i < BW_PORT_RANGES_MAX; i++) {
		if (i >= n)
			break;
		struct bw_port_range *pr = &rule->ranges[i];
		if (!(pr->proto_mask & proto) || !(pr->op_mask & op_bit))
			continue;
		if (r->port < pr->lo || r->port > pr->hi)
			continue;
		*rule_id = pr->rule_id;
		return pr->action != BW_NET_ACTION_ALLOW;
	}
	return 1;
}

static __always_inline void bw_emit_net(const struct bw_sbx *s, __u16 layer, __u16 op, __u8 decision,
					__u32 rule_id, const struct bw_net_req *r)
{
	struct bw_event *e = bw_event_begin(s, layer, op, decision, rule_id, BW_OBJ_NET);
	if (!e)
		return;
	e->obj.net.family = r->family;
	e->obj.net.type = r->type;
	e->obj.net.protocol = r->protocol;
	e->obj.net.port = r->port;
	__builtin_memcpy(e->obj.net.addr, r->addr, 16);
	bw_event_submit(e);
}

/* Full decision for one network operation: 1 = block it. */
static __always_inline int bw_net_decide(const struct bw_sbx *s, __u16 layer, __u16 op, __u8 op_bit,
					 struct bw_net_req *r)
{
	__u32 rule_id;
	bw_canonicalise(r, op_bit);
	int would_deny = bw_net_judge(s, r, op_bit, &rule_id);
	__u8 d = bw_decide(s, would_deny);
	bw_rule_hit(s, rule_id);
	if (bw_reportable(s, d))
		bw_emit_net(s, layer, op, d, rule_id, r);
	return d == BW_DECISION_DENY;
}

#endif /* BULWARK_NET_BPF_H */
