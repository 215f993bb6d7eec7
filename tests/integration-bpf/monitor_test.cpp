// Monitor programs: exec, fork and exit of sandboxed processes, every field.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstring>

#include "bpf_env.h"
#include "bulwark/abi.h"

using namespace bwtest;

TEST_CASE("monitor: exec, fork and exit events of a sandboxed process carry every field") {
    Leaf leaf("mon");
    auto t = net_policy(BW_POL_NET_NONE | BW_POL_TRACE_PROC);
    auto h = load(t);
    REQUIRE(Env::get().maps().bind(leaf.id, h, 5, 6));
    Env::get().drain();
    auto* ids = shared<int>(2);
    timespec ts0{};
    clock_gettime(CLOCK_BOOTTIME, &ts0);
    int rc = run_in(leaf.path, [&] {
        ids[0] = getpid();
        pid_t g = fork();
        if (g == 0) {
            char a0[] = "true";
            char* argv[] = {a0, nullptr};
            char* envp[] = {nullptr};
            execve("/bin/true", argv, envp);
            _exit(127);
        }
        ids[1] = g;
        int st = 0;
        waitpid(g, &st, 0);
        return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 3 : 99;
    });
    REQUIRE(rc == 3);
    timespec ts1{};
    clock_gettime(CLOCK_BOOTTIME, &ts1);
    const uint64_t t0 = uint64_t(ts0.tv_sec) * 1000000000ull + uint64_t(ts0.tv_nsec);
    const uint64_t t1 = uint64_t(ts1.tv_sec) * 1000000000ull + uint64_t(ts1.tv_nsec);
    auto ev = Env::get().events_of(leaf.id);
    const uint32_t child = static_cast<uint32_t>(ids[0]), grand = static_cast<uint32_t>(ids[1]);

    struct stat st{};
    REQUIRE(stat("/bin/true", &st) == 0);
    int forks = 0, execs = 0, exits_child = 0, exits_grand = 0;
    for (const auto& e : ev) {
        INFO("op " << e.op << " pid " << e.pid);
        CHECK(e.layer == BW_LAYER_MONITOR);
        CHECK(e.decision == BW_DECISION_OBSERVE);
        CHECK(e.ret == 0);
        CHECK(e.rule_id == BW_NO_RULE);
        CHECK(e.cgroup_id == leaf.id);
        CHECK(e.policy_id == h.slot);
        CHECK(e.policy_version == h.version);
        CHECK(e.ts_ns >= t0);
        CHECK(e.ts_ns <= t1);
        switch (e.op) {
        case BW_OP_PROC_FORK:
            ++forks;
            CHECK(e.pid == child);
            CHECK(e.tgid == child);
            CHECK(e.obj_kind == BW_OBJ_PROC);
            CHECK(e.obj.proc.target_pid == grand);
            CHECK(e.obj.proc.arg == 0);
            CHECK(e.obj.proc.target_cgroup_id == leaf.id);
            CHECK(std::strncmp(e.comm, "integration_bpf", 15) == 0);
            break;
        case BW_OP_PROC_EXEC:
            ++execs;
            CHECK(e.pid == grand);
            CHECK(e.tgid == grand);
            CHECK(std::string(e.comm) == "true");
            CHECK(e.obj_kind == BW_OBJ_FILE);
            CHECK(std::string(e.obj.file.path) == "/bin/true");
            CHECK(e.obj.file.ino == st.st_ino);
            CHECK(e.obj.file.dev == bulwark::abi::kernel_dev(major(st.st_dev), minor(st.st_dev)));
            CHECK(e.obj.file.rights == BW_FS_EXEC);
            break;
        case BW_OP_PROC_EXIT:
            CHECK(e.obj_kind == BW_OBJ_PROC);
            CHECK(e.obj.proc.target_cgroup_id == leaf.id);
            if (e.pid == grand) {
                ++exits_grand;
                CHECK(e.obj.proc.target_pid == grand);
                CHECK(e.obj.proc.arg == 0);
                CHECK(std::string(e.comm) == "true");
            } else {
                ++exits_child;
                CHECK(e.pid == child);
                CHECK(e.obj.proc.target_pid == child);
                CHECK(e.obj.proc.arg == (3u << 8));  // wait status of exit(3)
            }
            break;
        default:
            FAIL_CHECK("unexpected op " << e.op);
        }
    }
    CHECK(forks == 1);
    CHECK(execs == 1);
    CHECK(exits_grand == 1);
    CHECK(exits_child == 1);
    REQUIRE(Env::get().maps().free(h.slot));
}

TEST_CASE("monitor: syscall entry events only when the policy asks, scoped to the sandbox") {
    Leaf leaf("sys");
    auto h = load(net_policy(BW_POL_NET_NONE | BW_POL_TRACE_SYSCALLS));
    REQUIRE(Env::get().maps().bind(leaf.id, h));
    Env::get().drain();
    run_in(leaf.path, [] {
        for (int i = 0; i < 10; ++i) (void)getppid();
        return 0;
    });
    auto ev = Env::get().events_of(leaf.id);
    int getppids = 0;
    for (const auto& e : ev) {
        CHECK(e.op == BW_OP_SYSCALL);
        if (e.obj.proc.arg == 110 /* __NR_getppid on x86_64 */) ++getppids;
    }
    CHECK(getppids == 10);
    REQUIRE(Env::get().maps().free(h.slot));
}
