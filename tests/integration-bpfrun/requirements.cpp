// Root, and the cgroup sock_addr programs must load on this kernel.
#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "tier_skip.h"

std::string bulwark::test::tier_requirements() {
    if (geteuid() != 0) return "privileged tier: needs root (run the suite as root)";
    // The smallest cgroup/connect4 program: return 1.
    struct bpf_insn prog[] = {
        {BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 1},
        {BPF_JMP | BPF_EXIT, 0, 0, 0, 0},
    };
    LIBBPF_OPTS(bpf_prog_load_opts, o, .expected_attach_type = BPF_CGROUP_INET4_CONNECT);
    int fd = bpf_prog_load(BPF_PROG_TYPE_CGROUP_SOCK_ADDR, "probe", "GPL", prog, 2, &o);
    if (fd < 0) return std::string("BPF cgroup/connect4 programs cannot be loaded here: ") + std::strerror(-fd);
    close(fd);
    return {};
}
