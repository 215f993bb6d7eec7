#include "cli/bpf_options.h"

#include <CLI/CLI.hpp>

namespace bulwark {

void BpfCliOptions::add_to(CLI::App& cmd, const std::string& no_bpf_help) {
    cmd.add_option("--bpf-pin-root", pin_root, "bpffs directory of the shared BPF programs and maps");
    cmd.add_option("--bpf-cgroup-parent", cgroup_parent,
                   "cgroup v2 directory the BPF cgroup programs are attached to (default: <own cgroup>/bulwark)");
    cmd.add_flag("--no-bpf", no_bpf, no_bpf_help);
    if (reuse_proof)
        cmd.add_flag_callback(
            "--bpf-prove", [this] { reuse_proof = false; },
            "run the BPF truth check (its canaries) now, even where the record of an earlier one still holds for "
            "the pinned programs and maps");
}

StartedBpf start_bpf_runtime(const BpfCliOptions& o, bpf::RuntimeOptions ro) {
    if (o.no_bpf) return {nullptr, "BPF layer switched off (--no-bpf)"};
    ro.pin_root = o.pin_root;
    ro.cgroup_parent = o.cgroup_parent;
    ro.reuse_proof = o.reuse_proof;
    auto rt = bpf::BpfRuntime::start(std::move(ro));
    if (!rt) return {nullptr, "BPF runtime did not start: " + rt.error().message()};
    return {std::move(*rt), {}};
}

}  // namespace bulwark
