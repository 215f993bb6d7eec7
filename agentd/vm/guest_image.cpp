#include "vm/guest_image.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace bulwark::vm {

namespace fs = std::filesystem;

std::vector<std::string> guest_image_dirs() {
    std::vector<std::string> out;
    if (const char* e = std::getenv("BULWARK_GUEST_IMAGE"); e && *e) return {e};  // that image or none
#ifdef BULWARK_BUILD_GUEST_IMAGE_DIR
    out.emplace_back(BULWARK_BUILD_GUEST_IMAGE_DIR);
#endif
#ifdef BULWARK_INSTALLED_GUEST_IMAGE_DIR
    out.emplace_back(BULWARK_INSTALLED_GUEST_IMAGE_DIR);
#endif
    return out;
}

std::expected<GuestImage, std::string> load_guest_image(const std::string& dir) {
    std::error_code ec;
    fs::path d = fs::absolute(dir, ec);
    if (fs::exists(d / "unavailable.txt", ec) && !fs::exists(d / "image.json", ec)) {
        std::ifstream in(d / "unavailable.txt");
        std::stringstream ss;
        ss << in.rdbuf();
        std::string why = ss.str();
        while (!why.empty() && why.back() == '\n') why.pop_back();
        return std::unexpected("no guest image in " + d.string() + ": " + why);
    }
    std::ifstream in(d / "image.json");
    if (!in) return std::unexpected("no guest image in " + d.string() + " (no image.json; build target bulwark_guest_image)");
    auto j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return std::unexpected((d / "image.json").string() + ": not a JSON object");
    GuestImage img;
    img.dir = d.string();
    img.vmlinux = (d / "vmlinux").string();
    img.initramfs = (d / "initramfs.cpio").string();
    img.digest = j.value("digest", "");
    img.cmdline = j.value("cmdline", "");
    img.kernel_version = j.value("kernel_version", "");
    img.kernel_package = j.value("kernel_package", "");
    if (img.digest.empty() || img.cmdline.empty())
        return std::unexpected((d / "image.json").string() + ": no digest or cmdline");
    for (const auto& f : {img.vmlinux, img.initramfs})
        if (!fs::is_regular_file(f, ec)) return std::unexpected("guest image file missing: " + f);
    return img;
}

}  // namespace bulwark::vm
