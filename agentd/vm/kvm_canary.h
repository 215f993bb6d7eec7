#pragma once
// KVM proven by a canary VM, not by the device's presence (../shared
// KERNEL.md: a PVM host's /dev/kvm opens and creates VMs, yet a stock guest
// kernel under it is emulated instruction by instruction and fails).
//
//   settle_accel  find_vmm() chose KVM by the cheap signs (vmx/svm, no
//                 kvm_pvm): the guest image is booted once under KVM with
//                 `bulwark.canary` on its command line; its guest agent
//                 answers on the console (kCanaryAnswer) and powers off. No
//                 answer within the deadline: TCG, the reason saying what the
//                 canary saw, and whether the same canary answers under TCG
//                 (the control: the failure is KVM's, not the image's). BULWARK_KVM_CANARY=always boots the canary even
//                 where the cheap signs say no (what a test does on a PVM
//                 host, to watch it fail); BULWARK_KVM_CANARY_TIMEOUT_MS sets
//                 the deadline (default 10 s).
//
// A verdict is kept for the boot in /run/bulwark/kvm-canary/ (root; per
// qemu binary, image digest and boot id), so only the first probe of a boot
// pays for the canary; `always` proves afresh and keeps nothing.
#include <chrono>
#include <string>

#include "vm/guest_image.h"
#include "vm/vmm.h"

namespace bulwark::vm {

// Boots the canary under vmm.accel: "" when the guest agent answered
// within `deadline`, else why not.
std::string boot_canary(const Vmm& vmm, const GuestImage& img, std::chrono::milliseconds deadline);

// The accelerator `vmm` runs `img` with, proven (see above): vmm.accel and
// vmm.why_accel updated.
void settle_accel(Vmm& vmm, const GuestImage& img);

}  // namespace bulwark::vm
