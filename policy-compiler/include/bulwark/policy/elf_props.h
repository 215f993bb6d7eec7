#pragma once
// ELF hardening properties of a tool and of the shared libraries it loads.
// Self-contained reader (ELF64 and ELF32, either byte order) so the same code
// inspects x86_64 and aarch64 binaries on any host.
#include <cstdint>
#include <expected>
#include <string>
#include <vector>

namespace bulwark {

namespace policy {
class InputLog;
}

struct ElfProps {
    std::string path;
    uint16_t machine = 0;        // EM_*
    bool is_elf64 = false;
    bool dynamic = false;        // has PT_DYNAMIC
    bool pie = false;            // ET_DYN executable (or DF_1_PIE)
    bool relro = false;          // PT_GNU_RELRO
    bool bind_now = false;       // DT_BIND_NOW / DF_BIND_NOW / DF_1_NOW
    bool nx_stack = false;       // PT_GNU_STACK without PF_X
    bool stack_protector = false;// imports __stack_chk_fail / __stack_chk_guard
    bool fortify = false;        // imports some __*_chk
    bool cet_ibt = false, cet_shstk = false;   // GNU_PROPERTY_X86_FEATURE_1_AND
    bool bti = false, pac = false;             // GNU_PROPERTY_AARCH64_FEATURE_1_AND
    std::string interp;
    std::vector<std::string> needed;           // DT_NEEDED
    std::vector<std::string> runpath;          // DT_RUNPATH / DT_RPATH entries
};

// With `inputs`, the file is looked at (Look::Inode) before it is read.
std::expected<ElfProps, std::string> read_elf_props(const std::string& path, policy::InputLog* inputs = nullptr);
std::expected<ElfProps, std::string> read_elf_props_fd(int fd, const std::string& name);

// One shared library of a binary's closure and how the search reached it.
struct NeededLibrary {
    ElfProps props;         // props.path: the file found (sysroot included)
    std::string needed_as;  // the DT_NEEDED name, e.g. "libm.so.6"
    std::string needed_by;  // the object that names it (the binary or a library), sysroot included
    std::string found_via;  // "RUNPATH", "ld.so.conf", "default directories" or "path in DT_NEEDED"
};
struct MissingLibrary {
    std::string name;       // the DT_NEEDED name
    std::string needed_by;
};
struct LibraryClosure {
    std::vector<NeededLibrary> found;  // breadth of DT_NEEDED order, each name once
    std::vector<MissingLibrary> missing;
};

// Resolves DT_NEEDED names the way ld.so does for the standard case: the
// naming object's RUNPATH ($ORIGIN expanded), the directories of
// /etc/ld.so.conf, then the standard multiarch and lib directories; only
// objects of the binary's machine and class match. sysroot prefixes every
// directory (qemu-user -L, a container's root filesystem).
// Every file and directory the search reads or tries is noted in `inputs`.
LibraryClosure resolve_needed(const ElfProps& exe, const std::string& sysroot, policy::InputLog* inputs = nullptr);

// The found objects of resolve_needed; unresolved names in `missing`.
std::vector<ElfProps> read_needed_closure(const ElfProps& exe, const std::string& sysroot,
                                          std::vector<std::string>& missing);

// Value of one named property ("pie", "relro", "bind-now", "nx",
// "stack-protector", "fortify", "cet-ibt", "cet-shstk", "bti", "pac") for
// one object; the bool says whether the name is known.
std::pair<bool, bool> elf_property(const ElfProps& p, const std::string& name);
// Whether the property applies to shared libraries as well as the executable
// (pie, stack-protector and fortify are judged on the executable only).
bool property_covers_libraries(const std::string& name);

}  // namespace bulwark
