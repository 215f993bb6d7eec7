#pragma once
// The files a dynamically linked binary maps when it starts, as the kernel
// judges them: its program interpreter (PT_INTERP) and its DT_NEEDED closure
// (elf_props.h resolve_needed), each with symlinks resolved. Used by the
// compiler for `binaries: [{path: ..., libraries: auto}]` and by
// `policyc new`.
#include <expected>
#include <string>
#include <vector>

#include "bulwark/policy/compile_inputs.h"

namespace bulwark::policy {

struct BinaryLibrary {
    std::string path;       // the file the kernel judges: canonical, root stripped
    std::string needed_as;  // the DT_NEEDED name, or the interpreter as PT_INTERP names it
    std::string needed_by;  // the binary or library that names it (root stripped)
    std::string found_via;  // "PT_INTERP", "RUNPATH", "ld.so.conf", "default directories", "path in DT_NEEDED"
};

// `binary`: an absolute path inside `root` ("" for this host). Each library
// once, in the loader's order. Fails, saying why, when the binary is missing
// or not ELF (a script names its interpreter instead), when a library cannot
// be found (each named, with the object that needs it), or when a symlink
// leads out of `root`. A static binary has none. Every path looked at is
// noted in `inputs`.
std::expected<std::vector<BinaryLibrary>, std::string> binary_libraries(const std::string& binary,
                                                                        const std::string& root,
                                                                        InputLog* inputs = nullptr);

}  // namespace bulwark::policy
