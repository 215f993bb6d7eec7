#include "cli/bpf_options.h"

#include <CLI/CLI.hpp>

namespace bulwark {

void BpfCliOptions::add_to(CLI::App& cmd, const std::string& no_bpf_help) {
    cmd.add_option("--bpf-pin-root", pin_root, "bpffs directory of the shared BPF programs and maps");
    cmd.add_option("--bpf-cgroup-parent", cgroup_parent,
                   "cgroup v2 directory the BPF cgroup programs are attached to (default: <own cgroup>/bulwark)");
    cmd.add_flag("--no-bpf", no_bpf, no_bpf_help);
}

StartedBpf start_bpf_runtime(const BpfCliOptions& o, bpf::RuntimeOptions ro) {
    if (o.no_bpf) return {nullptr, "BPF layer switched off (--no-bpf)"};
    ro.pin_root = o.pin_root;
    ro.cgroup_parent = o.cgroup_parent;
    auto rt = bpf::BpfRuntime::start(std::move(ro));
    if (!rt) return {nullptr, "BPF runtime did not start: " + rt.error().message()};
    return {std::move(*rt), {}};
}

}  // namespace bulwark
