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
