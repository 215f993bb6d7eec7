// SPDX-License-Identifier: GPL-2.0
/* Benchmark baseline (not part of the product's programs): an LSM program at
 * file_open that allows at once, so vm_runner --bench can show what running
 * any BPF LSM program at that hook costs in the guest before Bulwark's
 * programs do any work. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

SEC("lsm/file_open")
int BPF_PROG(bw_bench_empty_file_open, struct file *file)
{
	return 0;
}
