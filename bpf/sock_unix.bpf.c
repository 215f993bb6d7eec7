// SPDX-License-Identifier: GPL-2.0
/* cgroup unix socket programs (Linux 6.7+), attached to the sandbox parent
 * cgroup like the sock_addr ones: a sandboxed task's connect, and its sendmsg
 * naming an address, to any pathname or abstract unix address is refused
 * unless the policy's bw_unix_rules allow that address (helpers/unix.bpf.h,
 * shared with the LSM socket hooks). Unnamed sockets (socketpair) and sends
 * on a connected socket never reach these hooks. The compiler refuses a unix
 * rule below a directory the tool may create or remove in, where the tool
 * could plant another socket or a symlink under the allowed name
 * (docs/rule-language.md).
 *
 * libbpf 1.1 does not know these sections or attach types: the loader sets
 * the program type and expected attach type (BW_ATTACH_CGROUP_UNIX_*) from
 * userspace before load. Return 1 lets the operation proceed, 0 = EPERM. */
#include "unix.bpf.h"

char LICENSE[] SEC("license") = "GPL";

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;

static __always_inline int bw_sock_unix(struct bpf_sock_addr *ctx, __u16 op, __u8 op_bit)
{
	struct bw_sbx s;
	if (!bw_sandbox(&s))
		return 1;
	struct bpf_sock_addr_kern *sa = bpf_cast_to_kern_ctx(ctx);
	/* the kernel validated the length (> 2, <= sizeof(sockaddr_un)) */
	return bw_unix_decide(&s, BW_LAYER_SOCK_UNIX, op, op_bit, ctx->type, (const char *)sa->uaddr, sa->uaddrlen)
		       ? 0
		       : 1;
}

SEC("cgroup/connect_unix")
int bw_connect_unix(struct bpf_sock_addr *ctx) { return bw_sock_unix(ctx, BW_OP_CONNECT, BW_NET_CONNECT); }

SEC("cgroup/sendmsg_unix")
int bw_sendmsg_unix(struct bpf_sock_addr *ctx) { return bw_sock_unix(ctx, BW_OP_SENDMSG, BW_NET_SEND); }
