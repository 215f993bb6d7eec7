#pragma once
// The VMM's own policy for one tool's VM: the shipped rules/vmm/qemu.yaml
// (compiled and instantiated for the run) plus, traced to the tool's rules,
// what the VM may see of the host: each of the tool's files rules with read
// and exec turned into read (the VMM only serves the files; the guest
// executes them), write, create and remove kept, every deny kept (so the
// mount layer masks it in the VMM's view, and 9p cannot serve it); the guest
// image's directory (read); memory = the VM's + the VMM's own; timeout = the
// tool's + the boot allowance.
#include <cstdint>
#include <string>

#include "bulwark/policy/bundle.h"
#include "vm/channel.h"  // kGuestDnsForwarder

namespace bulwark::vm {

inline constexpr uint64_t kVmmOverheadBytes = 512ull << 20;  // qemu's own RSS is ~230 MiB with the 58 MB vmlinux
inline constexpr uint64_t kBootAllowanceMs = 60'000;

policy::Bundle compose_vmm_bundle(const policy::Bundle& vmm, const policy::Bundle& tool, const std::string& image_dir);

// The tool's policy as the guest enforces it: the same, but that the
// resolvers its `network.dns` names are reached in the VM through qemu's
// forwarder, so there its DNS rules allow the forwarder (each rule's text
// says so), while the VMM's (compose_vmm_bundle) keep the resolvers
// themselves: a query passes the guest's check at the forwarder and the
// host's at the resolver it goes on to.
policy::Bundle guest_bundle(const policy::Bundle& tool);

}  // namespace bulwark::vm
