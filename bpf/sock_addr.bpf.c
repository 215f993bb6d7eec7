// SPDX-License-Identifier: GPL-2.0
/* cgroup socket programs, attached to the sandbox parent cgroup so every
 * sandbox leaf inherits them: connect/sendmsg/bind for v4 and v6 (judged in
 * one v6 address space), and sock_create for families and types.
 * Return 1 lets the operation proceed, 0 makes it fail with EPERM. */
#include "net.bpf.h"

char LICENSE[] SEC("license") = "GPL";

static __always_inline int bw_sock_addr4(struct bpf_sock_addr *ctx, __u16 op, __u8 op_bit)
{
	struct bw_sbx s;
	if (!bw_sandbox(&s))
		return 1;
	struct bw_net_req r = {};
	bw_addr_from_v4(r.addr, ctx->user_ip4);
	r.port = bpf_ntohs((__u16)ctx->user_port);
	r.family = AF_INET;
	r.type = ctx->type;
	r.protocol = ctx->protocol;
	return bw_net_decide(&s, BW_LAYER_SOCK_ADDR, op, op_bit, &r) ? 0 : 1;
}

static __always_inline int bw_sock_addr6(struct bpf_sock_addr *ctx, __u16 op, __u8 op_bit)
{
	struct bw_sbx s;
	if (!bw_sandbox(&s))
		return 1;
	struct bw_net_req r = {};
	/* the context only allows whole 4-byte loads of user_ip6[]: keep clang from splitting them */
	__u32 w0 = ctx->user_ip6[0], w1 = ctx->user_ip6[1], w2 = ctx->user_ip6[2], w3 = ctx->user_ip6[3];
	asm volatile("" : "+r"(w0), "+r"(w1), "+r"(w2), "+r"(w3));
	__builtin_memcpy(r.addr, &w0, 4);
	__builtin_memcpy(r.addr + 4, &w1, 4);
	__builtin_memcpy(r.addr + 8, &w2, 4);
	__builtin_memcpy(r.addr + 12, &w3, 4);
	r.port = bpf_ntohs((__u16)ctx->user_port);
	r.family = AF_INET6;
	r.type = ctx->type;
	r.protocol = ctx->protocol;
	return bw_net_decide(&s, BW_LAYER_SOCK_ADDR, op, op_bit, &r) ? 0 : 1;
}

SEC("cgroup/connect4")
int bw_connect4(struct bpf_sock_addr *ctx) { return bw_sock_addr4(ctx, BW_OP_CONNECT, BW_NET_CONNECT); }

SEC("cgroup/connect6")
int bw_connect6(struct bpf_sock_addr *ctx) { return bw_sock_addr6(ctx, BW_OP_CONNECT, BW_NET_CONNECT); }

SEC("cgroup/sendmsg4")
int bw_sendmsg4(struct bpf_sock_addr *ctx) { return bw_sock_addr4(ctx, BW_OP_SENDMSG, BW_NET_SEND); }

SEC("cgroup/sendmsg6")
int bw_sendmsg6(struct bpf_sock_addr *ctx) { return bw_sock_addr6(ctx, BW_OP_SENDMSG, BW_NET_SEND); }

SEC("cgroup/bind4")
int bw_bind4(struct bpf_sock_addr *ctx) { return bw_sock_addr4(ctx, BW_OP_BIND, BW_NET_BIND); }

SEC("cgroup/bind6")
int bw_bind6(struct bpf_sock_addr *ctx) { return bw_sock_addr6(ctx, BW_OP_BIND, BW_NET_BIND); }

/* Families and types: bit n of af_allow / sock_type_allow. */
SEC("cgroup/sock_create")
int bw_sock_create(struct bpf_sock *ctx)
{
	struct bw_sbx s;
	if (!bw_sandbox(&s))
		return 1;
	__u32 family = ctx->family, type = ctx->type, protocol = ctx->protocol;
	int would_deny = !s.valid || family >= 64 || !(s.af_allow & (1ull << family)) || type >= 32 ||
			 !(s.sock_type_allow & (1u << type));
	__u8 d = bw_decide(&s, would_deny);
	if (bw_reportable(&s, d)) {
		struct bw_net_req r = {};
		r.family = family;
		r.type = type;
		r.protocol = protocol;
		bw_emit_net(&s, BW_LAYER_SOCK_CREATE, BW_OP_SOCK_CREATE, d, BW_NO_RULE, &r);
	}
	return d == BW_DECISION_DENY ? 0 : 1;
}
