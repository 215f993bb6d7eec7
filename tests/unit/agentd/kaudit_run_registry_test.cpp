// agentd/kaudit/run_registry.cpp: which run a kernel audit denial belongs to.
// A live process is judged by its cgroup alone (a pid that is not in a
// run's cgroup is not a run's, whatever it was before); an exited one by
// the run's first pid; a Landlock domain, once attributed, stays with its
// run. No root: this process's own cgroup stands in for a run's leaf.
#include <catch2/catch.hpp>

#include <unistd.h>

#include "kaudit/kernel_audit_parse.h"
#include "kaudit/run_registry.h"

using namespace bulwark;

namespace {

// A pid that no process has now (the highest pid the kernel hands out, plus one).
constexpr pid_t kGonePid = 4194304 + 1;

}  // namespace

TEST_CASE("a live process is its cgroup's run, and only that") {
    auto own = cgroup_v2_of_pid(::getpid());
    REQUIRE(own);
    RunRegistry reg;
    CHECK_FALSE(reg.resolve_pid(::getpid()));
    reg.add(*own, kGonePid, RunContext{.task_id = 7, .run_id = 70, .tool = "cat"});
    reg.add("/sys/fs/cgroup/elsewhere/bulwark-run-1-1", ::getpid(), RunContext{.task_id = 8, .run_id = 80});
    CHECK(reg.size() == 2);
    auto r = reg.resolve_pid(::getpid());
    REQUIRE(r);
    // By its cgroup, not by the other run's recorded first pid (which this is).
    CHECK(r->run_id == 70);
    CHECK(reg.by_cgroup(*own)->tool == "cat");
    reg.remove(*own);
    // Alive and in no run's cgroup: no run, even though a run's first pid is this one.
    CHECK_FALSE(reg.resolve_pid(::getpid()));
}

TEST_CASE("an exited process is the run whose first pid it was") {
    RunRegistry reg;
    reg.add("/sys/fs/cgroup/x/bulwark-run-1-2", kGonePid, RunContext{.task_id = 1, .run_id = 12});
    auto r = reg.resolve_pid(kGonePid);
    REQUIRE(r);
    CHECK(r->run_id == 12);
    CHECK_FALSE(reg.resolve_pid(kGonePid + 1));
}

TEST_CASE("a denial is attributed by its Landlock domain's creator, then kept by domain") {
    RunRegistry reg;
    const std::string leaf = "/sys/fs/cgroup/x/bulwark-run-1-3";
    reg.add(leaf, kGonePid, RunContext{.task_id = 2, .run_id = 23, .tool = "sh"});
    kaudit::KernelDenial d;
    d.layer = kaudit::KernelDenial::Layer::Landlock;
    d.domain = 0xabc;
    d.domain_creator_pid = kGonePid;
    d.pid = kGonePid + 7;  // a child that has exited too
    auto r = reg.resolve(d);
    REQUIRE(r);
    CHECK(r->run_id == 23);
    // Later denials of the domain name no creator: the domain is remembered.
    kaudit::KernelDenial later;
    later.layer = kaudit::KernelDenial::Layer::Landlock;
    later.domain = 0xabc;
    later.pid = kGonePid + 9;
    REQUIRE(reg.resolve(later));
    CHECK(reg.resolve(later)->run_id == 23);
    // The run ends: its domain goes with it.
    reg.remove(leaf);
    CHECK_FALSE(reg.resolve(later));
}

TEST_CASE("a seccomp denial is attributed by its pid, then its parent") {
    RunRegistry reg;
    reg.add("/sys/fs/cgroup/x/bulwark-run-1-4", kGonePid, RunContext{.run_id = 34});
    kaudit::KernelDenial d;
    d.layer = kaudit::KernelDenial::Layer::Seccomp;
    d.pid = kGonePid + 3;
    CHECK_FALSE(reg.resolve(d));
    d.ppid = kGonePid;
    REQUIRE(reg.resolve(d));
    CHECK(reg.resolve(d)->run_id == 34);
}
