/* Context of one BPF_PROG_RUN of ringbuf_producer.bpf.c (shared with the benchmark). */
#ifndef BULWARK_BENCH_RINGBUF_PRODUCER_H
#define BULWARK_BENCH_RINGBUF_PRODUCER_H

struct bw_bench_args {
	__u64 cgroup_id;   /* stamped on every record */
	__u32 count;       /* records to write in this run */
	__u32 max_unread;  /* stop while more than this many bytes wait unread */
	__u32 written;     /* out: records written */
	__u32 pad;
};

#endif
