// Shared Catch2 main for every test tier. A tier may define
// bulwark_tier_requirements() (tier_skip.h) to exit 77 with a reason when
// what it needs is missing.
//
// In the arm64 cross build (cmake/BulwarkTest.cmake) the tier is a shared
// library whose bulwark_test_main the stub executable calls, and before any
// test runs the process proves that it runs the way the tier claims: MTE in
// synchronous mode with the heap tagged, PAC, and this library's code marked
// for BTI on a CPU that has it (the loader then maps it guarded). A tier run
// without them fails (exit 1): it would not catch what it is there to catch.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "tier_skip.h"

#include <cstdio>

#ifdef BULWARK_ARM64_POSTURE
#include <asm/hwcap.h>
#include <elf.h>
#include <link.h>
#include <sys/auxv.h>
#include <sys/prctl.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

extern "C" int bulwark_test_main(int argc, char** argv);

namespace {

struct Marks {
    const void* code;
    std::string object;
    uint32_t features = 0;  // GNU_PROPERTY_AARCH64_FEATURE_1_AND of that object
};

// The AArch64 feature property of the object holding Marks::code, read from
// its loaded PT_GNU_PROPERTY segment.
int read_marks(dl_phdr_info* info, size_t, void* arg) {
    auto* m = static_cast<Marks*>(arg);
    auto addr = reinterpret_cast<uintptr_t>(m->code);
    bool mine = false;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const auto& ph = info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph.p_vaddr;
        if (ph.p_type == PT_LOAD && addr >= start && addr < start + ph.p_memsz) mine = true;
    }
    if (!mine) return 0;
    m->object = info->dlpi_name;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const auto& ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_GNU_PROPERTY) continue;
        auto* p = reinterpret_cast<const unsigned char*>(info->dlpi_addr + ph.p_vaddr);
        auto* end = p + ph.p_memsz;
        while (p + 16 <= end) {
            uint32_t namesz, descsz, type;
            std::memcpy(&namesz, p, 4);
            std::memcpy(&descsz, p + 4, 4);
            std::memcpy(&type, p + 8, 4);
            const unsigned char* desc = p + 12 + ((namesz + 3) & ~3u);
            if (type == NT_GNU_PROPERTY_TYPE_0 && namesz == 4 && std::memcmp(p + 12, "GNU", 4) == 0) {
                for (auto* q = desc; q + 8 <= desc + descsz && q + 8 <= end;) {
                    uint32_t pr_type, pr_size;
                    std::memcpy(&pr_type, q, 4);
                    std::memcpy(&pr_size, q + 4, 4);
                    if (pr_type == GNU_PROPERTY_AARCH64_FEATURE_1_AND && pr_size >= 4) std::memcpy(&m->features, q + 8, 4);
                    q += 8 + ((pr_size + 7) & ~7u);
                }
            }
            p = desc + ((descsz + 7) & ~7u);
        }
    }
    return 1;
}

// "" when MTE sync, PAC and BTI hold in this process, else what is missing.
std::string arm64_posture(std::string& said) {
    std::string missing;
    unsigned long hwcap = getauxval(AT_HWCAP), hwcap2 = getauxval(AT_HWCAP2);
    int ctrl = prctl(PR_GET_TAGGED_ADDR_CTRL, 0, 0, 0, 0);
    void* probe = std::malloc(32);
    unsigned tag = static_cast<unsigned>(reinterpret_cast<uintptr_t>(probe) >> 56) & 0xf;
    std::free(probe);
    if (!(hwcap2 & HWCAP2_MTE)) missing += " no MTE on this CPU (HWCAP2_MTE);";
    if (ctrl < 0 || (ctrl & PR_MTE_TCF_MASK) != PR_MTE_TCF_SYNC)
        missing += " MTE not in synchronous mode (PR_GET_TAGGED_ADDR_CTRL " + std::to_string(ctrl) +
                   "; GLIBC_TUNABLES=glibc.mem.tagging=3);";
    if (tag == 0) missing += " heap pointers untagged (glibc's malloc does not tag);";
    Marks m{reinterpret_cast<const void*>(&bulwark_test_main), {}};
    dl_iterate_phdr(read_marks, &m);
    if (!(hwcap & HWCAP_PACA)) missing += " no PAC on this CPU (HWCAP_PACA);";
    if (!(m.features & GNU_PROPERTY_AARCH64_FEATURE_1_PAC)) missing += " " + m.object + " not marked PAC;";
    if (!(hwcap2 & HWCAP2_BTI)) missing += " no BTI on this CPU (HWCAP2_BTI);";
    if (!(m.features & GNU_PROPERTY_AARCH64_FEATURE_1_BTI)) missing += " " + m.object + " not marked BTI;";
    char line[512];
    std::snprintf(line, sizeof line, "arm64: MTE sync (tagged_addr_ctrl 0x%x, heap tag %u), PAC, BTI: %s marked 0x%x",
                  static_cast<unsigned>(ctrl), tag, m.object.c_str(), m.features);
    said = line;
    return missing;
}

}  // namespace

#define BULWARK_MAIN extern "C" __attribute__((visibility("default"))) int bulwark_test_main
#else
#define BULWARK_MAIN int main
#endif

BULWARK_MAIN(int argc, char** argv) {
#ifdef BULWARK_ARM64_POSTURE
    std::string said;
    if (auto missing = arm64_posture(said); !missing.empty()) {
        std::printf("FAIL: arm64 hardening not in force:%s\n", missing.c_str());
        return 1;
    }
    std::printf("%s\n", said.c_str());
    std::fflush(stdout);
#endif
    if (auto reason = bulwark::test::tier_requirements(); !reason.empty()) {
        std::printf("SKIP: %s\n", reason.c_str());
        return 77;
    }
    return Catch::Session().run(argc, argv);
}
