// SPDX-License-Identifier: GPL-2.0
/* Benchmark baseline (not part of the product's programs): programs at the
 * same cgroup hooks as bw_sock_create and bw_connect4 that allow at once, so
 * bpf_connect_bench can show what running any program at these hooks costs
 * before Bulwark's programs do any work. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

SEC("cgroup/sock_create")
int bw_bench_empty_sock_create(struct bpf_sock *ctx) { return 1; }

SEC("cgroup/connect4")
int bw_bench_empty_connect4(struct bpf_sock_addr *ctx) { return 1; }
