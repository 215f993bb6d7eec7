// SPDX-License-Identifier: GPL-2.0
/* Benchmark producer for the bw_events ring buffer (not part of the product's
 * programs): one BPF_PROG_RUN of this syscall program reserves, fills and
 * submits up to `count` monitor records exactly as the monitor programs do
 * (bw_event_begin / bw_event_submit: same record, same wake-up rule), so the
 * consumer can be measured without a syscall per record on the producer side.
 * It stops early, returning how many it wrote, while more than `max_unread`
 * bytes wait unread: the producer keeps pace with the reader instead of
 * overrunning it. Reserve failures are counted in bw_stats like any other. */
#include "sandbox.bpf.h"
#include "ringbuf_producer.h"

char LICENSE[] SEC("license") = "GPL";


struct bw_bench_loop {
	struct bw_sbx s;
	__u32 max_unread;
	__u32 seq;
};

static long bw_bench_one(__u64 i, void *data)
{
	struct bw_bench_loop *l = data;
	if (bpf_ringbuf_query(&bw_events, BPF_RB_AVAIL_DATA) > l->max_unread)
		return 1;
	bw_observe();
	struct bw_event *e = bw_event_begin(&l->s, BW_LAYER_MONITOR, BW_OP_SYSCALL, BW_DECISION_OBSERVE, BW_NO_RULE,
					    BW_OBJ_PROC);
	if (!e)
		return 1;
	e->obj.proc.target_pid = e->tgid;
	e->obj.proc.arg = l->seq++;
	e->obj.proc.target_cgroup_id = l->s.cgid;
	bw_event_submit(e);
	return 0;
}

SEC("syscall")
int bw_bench_produce(struct bw_bench_args *args)
{
	struct bw_bench_loop l = {};
	l.s.cgid = args->cgroup_id;
	l.s.valid = 1;
	l.s.mode = BW_MODE_ENFORCE;
	l.s.flags = BW_POL_TRACE_SYSCALLS;
	l.max_unread = args->max_unread;
	bpf_loop(args->count, bw_bench_one, &l, 0);
	args->written = l.seq;
	return 0;
}
