#pragma once
// Which enforcement layers this host really has, for /v1/health's
// "host.layers" and the dashboard: each layer is {"state": "enforcing" |
// "observing" | "attached" | "unavailable", "detail": what is in force or why
// not}. A layer counts as enforcing only after its canary was denied
// (seccomp_canary, landlock_canary, a child that unshares every namespace,
// BpfLoader's per-program canaries); a file in /sys or /proc alone never
// makes a layer enforcing. Besides "layers": kernel, LSM list, BTF, bpffs,
// and the CPU's hardening facts ("hardening"; per run: run_exit records).
#include <vector>

#include <nlohmann/json.hpp>

#include "bpf/feature_probe.h"

namespace bulwark {

// programs: BpfLoader::start()'s statuses, or null when this daemon loaded
// no BPF object (then the BPF layers are unavailable and say so).
// Runs the canaries (each once per process; a few forks).
nlohmann::json probe_host_layers(const std::vector<bpf::ProgramStatus>* programs);

// The BPF layers (bpf_lsm, sock_addr, sock_unix, monitor) from a status document of the
// form {"state": "...", "programs": {"<section>": "enforcing" | "observing" |
// "attached: <why>" | "unavailable: <why>"}}: sections lsm/* are bpf_lsm,
// cgroup/*_unix sock_unix (the cgroup unix hooks, Linux 6.7+), other cgroup/*
// sock_addr, the rest monitor; the weakest program decides a
// layer's state (an opt-in program "not requested" is listed, not counted). Without "programs" every BPF layer is unavailable with the
// document's "state" as the reason.
nlohmann::json bpf_layers_from_status(const nlohmann::json& status);

}  // namespace bulwark
