#pragma once
// The VMM that runs a tool's VM: qemu -M microvm (Debian's qemu-system-x86),
// with KVM only where the host has hardware virtualisation it can use, TCG
// otherwise. A /dev/kvm that opens is not proof: a PVM host's KVM cannot run
// a stock guest kernel (it falls back to instruction emulation and fails), so
// find_vmm() offers KVM only with vmx/svm in /proc/cpuinfo and no kvm_pvm
// module, and a canary VM then proves it (kvm_canary.h).
#include <cstdint>
#include <expected>
#include <string>
#include <vector>

#include "vm/guest_image.h"

namespace bulwark::vm {

struct Vmm {
    std::string binary;   // /usr/bin/qemu-system-x86_64
    std::string firmware; // qboot.rom
    std::string accel;    // "kvm" or "tcg"
    std::string why_accel;
    uint64_t tsc_khz = 0; // TCG: the guest's TSC (calibration hangs without it)
};

// The VMM this host offers, or why none.
std::expected<Vmm, std::string> find_vmm();

// The shape of one VM.
struct VmShape {
    uint64_t memory_bytes = 256ull << 20;
    uint32_t vcpus = 1;
    std::string workdir;   // exported read-write as 9p "work"
    int channel_fd = -1;   // the VMM's end of the channel (a connected socket)
    int qmp_fd = -1;       // the VMM's end of its QMP monitor (a connected socket), or none
    int incoming_fd = -1;  // a snapshot to restore from (-incoming fd:N), or none
    // a virtio-net device on qemu's user-mode network (10.0.2.0/24, the
    // host at 10.0.2.2): the guest's connections leave as the VMM's own,
    // judged on the host under the VMM's policy (the tool's network rules)
    bool network = false;
    // A canary VM (kvm_canary.h): no shares, no channel, no monitor; the
    // guest agent answers on the console and powers off.
    bool canary = false;
};

// qemu's command line: microvm, the image (PVH vmlinux + initramfs), the
// serial console on stdout, the channel as virtio-serial port bulwark.ctl on
// `channel_fd`, the VMM's root as 9p "root" (read-only) and the workdir as
// 9p "work", a user-mode network device when shape.network (else none),
// qemu's own seccomp sandbox on.
std::vector<std::string> qemu_argv(const Vmm& vmm, const GuestImage& img, const VmShape& shape);

}  // namespace bulwark::vm
