#include "bulwark/policy/libraries.h"

#include "bulwark/policy/elf_props.h"

namespace bulwark::policy {
namespace {

// `path` (root included) with every symlink resolved, root stripped again;
// fails when it does not exist or leads out of root.
std::expected<std::string, std::string> inside_root(const std::string& path, const std::string& root,
                                                   InputLog* inputs) {
    std::string real = look_via(inputs, Look::Resolve, path);
    if (real.starts_with("error: ")) return std::unexpected(path.substr(root.size()) + ": " + real.substr(7));
    if (root.empty()) return real;
    if (!real.starts_with(root + "/"))
        return std::unexpected(path.substr(root.size()) + " resolves to " + real + ", outside the root " + root);
    return real.substr(root.size());
}

}  // namespace

std::expected<std::vector<BinaryLibrary>, std::string> binary_libraries(const std::string& binary,
                                                                        const std::string& root_dir,
                                                                        InputLog* inputs) {
    const std::string root = root_dir == "/" ? "" : root_dir;
    auto real = inside_root(root + binary, root, inputs);
    if (!real) return std::unexpected(real.error());
    auto exe = read_elf_props(root + *real, inputs);
    if (!exe)
        return std::unexpected(binary + " is not an ELF program (" + exe.error() +
                               "); for a script, list its interpreter (e.g. /usr/bin/perl) as the binary");
    auto closure = resolve_needed(*exe, root, inputs);
    if (!closure.missing.empty()) {
        std::string names;
        for (const auto& m : closure.missing)
            names += (names.empty() ? "" : ", ") + m.name + " (needed by " + m.needed_by.substr(root.size()) + ")";
        return std::unexpected("shared libraries of " + binary + " that the loader would not find: " + names);
    }
    std::vector<BinaryLibrary> out;
    auto add = [&](const std::string& found, BinaryLibrary lib) -> std::expected<void, std::string> {
        auto path = inside_root(found, root, inputs);
        if (!path) return std::unexpected(path.error());
        for (const auto& l : out)
            if (l.path == *path) return {};
        lib.path = std::move(*path);
        out.push_back(std::move(lib));
        return {};
    };
    if (!exe->interp.empty())
        if (auto ok = add(root + exe->interp, {"", exe->interp, binary, "PT_INTERP"}); !ok)
            return std::unexpected(ok.error());
    for (const auto& l : closure.found)
        if (auto ok = add(l.props.path, {"", l.needed_as, l.needed_by.substr(root.size()), l.found_via}); !ok)
            return std::unexpected(ok.error());
    return out;
}

}  // namespace bulwark::policy
