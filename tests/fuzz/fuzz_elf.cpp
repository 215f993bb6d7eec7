// libFuzzer target: any bytes as an ELF file under agentd's hardening
// checker (policy-compiler/src/elf_props.cpp: ELF32/ELF64, either byte order,
// program headers, the dynamic section, notes and dynamic symbols), read
// through read_elf_props_fd from a memfd exactly as a tool's binary is read
// from its file. A tool's binary is the tool author's choice: the reader
// must survive any bytes. Invariants beyond "no crash, no sanitizer
// report": every property name the checker knows answers for the result.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "bulwark/policy/elf_props.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const int fd = ::memfd_create("fuzz-elf", MFD_CLOEXEC);
    if (fd < 0) std::abort();
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) std::abort();
    auto p = bulwark::read_elf_props_fd(fd, "fuzz.elf");
    if (!p) return 0;
    for (const char* name : {"pie", "relro", "bind-now", "nx", "stack-protector", "fortify", "cet-ibt", "cet-shstk",
                             "bti", "pac"})
        if (!bulwark::elf_property(*p, name).first) std::abort();
    return 0;
}
