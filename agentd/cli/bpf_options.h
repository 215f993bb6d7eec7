#pragma once
// The BPF layer as the subcommands that start it (agentd run, serve,
// coverage) take it from the command line: the same options, defaults and
// reasons for its absence everywhere.
#include <memory>
#include <string>

#include "bpf/bpf_runtime.h"

namespace CLI {
class App;
}

namespace bulwark {

struct BpfCliOptions {
    std::string pin_root = "/sys/fs/bpf/bulwark";
    std::string cgroup_parent;  // "": <own cgroup>/bulwark
    bool no_bpf = false;
    // One-shot commands take the verdicts of an earlier truth check that
    // still holds for the pinned links (LoaderOptions::reuse_proof) unless
    // --bpf-prove asks for a canary run of their own; agentd serve always
    // proves at its start.
    bool reuse_proof = false;

    // --bpf-pin-root, --bpf-cgroup-parent, and --no-bpf with this help;
    // --bpf-prove where reuse_proof is on.
    void add_to(CLI::App& cmd, const std::string& no_bpf_help);
};

// The BPF runtime the options ask for, started with `ro` (its sink and loss
// callback set by the caller), or why there is none: "BPF layer switched off
// (--no-bpf)" or "BPF runtime did not start: ...".
struct StartedBpf {
    std::unique_ptr<bpf::BpfRuntime> runtime;
    std::string unavailable;
};
StartedBpf start_bpf_runtime(const BpfCliOptions& o, bpf::RuntimeOptions ro);

}  // namespace bulwark
