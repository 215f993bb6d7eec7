#include "vm/vmm.h"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace bulwark::vm {

namespace fs = std::filesystem;

namespace {

uint64_t host_tsc_khz() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line))
        if (line.starts_with("cpu MHz")) {
            auto c = line.find(':');
            if (c != std::string::npos) return uint64_t(std::stod(line.substr(c + 1)) * 1000.0);
        }
    return 0;
}

// KVM that can run a stock kernel: hardware virtualisation and a KVM that is
// not PVM.
std::string kvm_unusable() {
    std::error_code ec;
    if (!fs::exists("/dev/kvm", ec)) return "no /dev/kvm";
    if (fs::exists("/sys/module/kvm_pvm", ec))
        return "/dev/kvm is PVM (kvm_pvm), which cannot run a stock guest kernel";
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    bool hw = false;
    while (std::getline(in, line))
        if (line.starts_with("flags") && (line.find(" vmx") != std::string::npos || line.find(" svm") != std::string::npos))
            hw = true;
    if (!hw) return "no vmx or svm CPU flag";
    int fd = ::open("/dev/kvm", O_RDWR | O_CLOEXEC);
    if (fd < 0) return "/dev/kvm does not open";
    ::close(fd);
    return "";
}

}  // namespace

std::expected<Vmm, std::string> find_vmm() {
    Vmm v;
    std::error_code ec;
    for (const char* b : {"/usr/bin/qemu-system-x86_64"})
        if (fs::exists(b, ec)) v.binary = b;
    if (v.binary.empty()) return std::unexpected("no qemu-system-x86_64 (Debian package qemu-system-x86)");
    for (const char* f : {"/usr/share/qemu/qboot.rom"})
        if (fs::exists(f, ec)) v.firmware = f;
    if (v.firmware.empty()) return std::unexpected("no /usr/share/qemu/qboot.rom (Debian package qemu-system-data)");
    // KVM by its signs only: kvm_canary.h's settle_accel proves it with the
    // guest image before a VM runs under it.
    if (auto why = kvm_unusable(); why.empty()) {
        v.accel = "kvm";
        v.why_accel = "hardware virtualisation (not yet proven by a canary VM)";
    } else {
        v.accel = "tcg";
        v.why_accel = "no usable KVM: " + why;
    }
    v.tsc_khz = host_tsc_khz();  // for TCG, also where a canary sends a KVM choice back to it
    return v;
}

std::vector<std::string> qemu_argv(const Vmm& vmm, const GuestImage& img, const VmShape& shape) {
    std::string append = img.cmdline;
    if (vmm.accel == "tcg") {
        if (vmm.tsc_khz) append += " tsc_early_khz=" + std::to_string(vmm.tsc_khz);
        // TCG does not execute guest code speculatively on the host CPU: the
        // guest kernel's speculation mitigations guard nothing there.
        append += " mitigations=off";
    }
    if (shape.canary) append += " bulwark.canary";
    const std::string fs_opts = ",security_model=none,multidevs=remap";
    std::vector<std::string> argv = {
        vmm.binary,
        "-M", "microvm,x-option-roms=off,isa-serial=on,rtc=on",
        "-bios", vmm.firmware,
        "-accel", vmm.accel,
        "-cpu", vmm.accel == "kvm" ? "host" : "max",
        "-smp", std::to_string(shape.vcpus),
        "-m", std::to_string(shape.memory_bytes >> 20) + "M",
        "-nodefaults", "-no-user-config", "-nographic", "-no-reboot",
        "-serial", "stdio",
        "-kernel", img.vmlinux,
        "-initrd", img.initramfs,
        "-append", append,
        "-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
    };
    if (!shape.canary)
        argv.insert(argv.end(), {"-fsdev", "local,id=root,path=/,readonly=on" + fs_opts,
                                 "-device", "virtio-9p-device,fsdev=root,mount_tag=root",
                                 "-fsdev", "local,id=work,path=" + shape.workdir + fs_opts,
                                 "-device", "virtio-9p-device,fsdev=work,mount_tag=work",
                                 "-chardev", "socket,id=ctl,fd=" + std::to_string(shape.channel_fd),
                                 "-device", "virtio-serial-device",
                                 "-device", "virtserialport,chardev=ctl,name=bulwark.ctl"});
    if (shape.network)
        argv.insert(argv.end(), {"-netdev", "user,id=net0,ipv6=off,net=10.0.2.0/24,restrict=off", "-device",
                                 "virtio-net-device,netdev=net0"});
    else
        argv.insert(argv.end(), {"-nic", "none"});
    if (shape.qmp_fd >= 0) {
        argv.insert(argv.end(), {"-chardev", "socket,id=qmp,fd=" + std::to_string(shape.qmp_fd), "-mon",
                                 "chardev=qmp,mode=control"});
    }
    if (shape.incoming_fd >= 0) argv.insert(argv.end(), {"-incoming", "fd:" + std::to_string(shape.incoming_fd)});
    return argv;
}

}  // namespace bulwark::vm
