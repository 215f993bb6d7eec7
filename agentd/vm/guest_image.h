#pragma once
// The guest image the microVM tier boots (microvm/image): an uncompressed
// Debian vmlinux, an initramfs whose /init is bulwark-guest, and image.json
// with their digest. Where the build could not make one, unavailable.txt
// says why.
#include <expected>
#include <string>
#include <vector>

namespace bulwark::vm {

struct GuestImage {
    std::string dir;             // absolute
    std::string vmlinux, initramfs;
    std::string digest;          // "sha256:..." over vmlinux, initramfs and cmdline
    std::string cmdline;         // the base kernel command line
    std::string kernel_version;  // the guest's `uname -r`
    std::string kernel_package;
};

// The image in `dir`, checked (files present, manifest complete), or why
// there is none.
std::expected<GuestImage, std::string> load_guest_image(const std::string& dir);

// Where agentd looks: $BULWARK_GUEST_IMAGE alone when set, else the build
// tree's image, then the installed one.
std::vector<std::string> guest_image_dirs();

}  // namespace bulwark::vm
