#pragma once
// Network namespace. `network: none` and `loopback`: the tool gets its own
// netns with only lo, brought up here (child side, async-signal-safe).
// Tools with network rules stay in the host netns: cgroup sock_addr programs
// (attached to the run's v2 leaf by the BPF loader) and Landlock TCP port
// rules confine them; see spawner.cpp.
namespace bulwark {
// Returns 0 or -errno.
int net_child_loopback_up();
}  // namespace bulwark

#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/fd.h"

namespace bulwark {

// A pool of network namespaces with only lo (up), owned by the initial user
// namespace, recycled between runs. Creating and tearing down a netns is
// the dominant cost of a spawn; a recycled one costs two setns() calls.
// Why reuse is safe: the tool holds no capability over a netns owned by the
// initial user namespace (no route, address, firewall or sysctl change is
// possible), every socket it had dies with its processes, and a netns goes
// back to the pool only after the run's cgroup is empty. One netns serves
// one sandbox at a time, so concurrent sandboxes never share one.
class NetnsPool {
public:
    // Free namespaces kept for reuse at most (more are closed on release).
    static constexpr size_t kMaxFree = 16;
    static NetnsPool& instance();
    // A netns fd for one run (from the pool, or freshly made).
    std::optional<Fd> acquire(std::string& error);
    // Returns it after the run's processes are all gone.
    void release(Fd netns);

private:
    std::mutex mu_;
    std::vector<Fd> free_;
};

// Moves the calling thread into `netns` (saving its own) for the clone3 of
// a run, and back. leave_thread_netns aborts the process if it cannot return.
bool enter_thread_netns(int netns, int& saved_own);
void leave_thread_netns(int saved_own);

}  // namespace bulwark
