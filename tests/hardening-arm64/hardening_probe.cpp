// Cross-built (aarch64) driver of agentd's hardening and ELF modules, run
// under qemu-aarch64 -cpu max by hardening_arm64_test.cpp.
//   hardening_probe cpu                      -> "arch=aarch64 mte=1"
//   hardening_probe props FILE               -> "pie=.. relro=.. ... bti=.. pac=.."
//   hardening_probe plan MTE FILE [PROP...]  -> "TUNABLES <value>" | "REFUSED <why>"
//   hardening_probe env MTE FILE             -> "GLIBC_TUNABLES=<value>": this process's
//       environment through the spawner's hardening step (harden_env), the
//       variable as run_tool hands it to the tool
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <unistd.h>
#include <vector>

#include "bulwark/policy/elf_props.h"
#include "sandbox/hardening.h"

using namespace bulwark;

int main(int argc, char** argv) {
    if (argc < 2) return 2;
    std::string mode = argv[1];
    if (mode == "cpu") {
        auto f = CpuFeatures::probe();
        std::printf("arch=%s mte=%d\n", f.arch.c_str(), f.mte ? 1 : 0);
        return 0;
    }
    if (mode == "props" && argc > 2) {
        auto p = read_elf_props(argv[2]);
        if (!p) {
            std::printf("ERROR %s\n", p.error().c_str());
            return 1;
        }
        std::printf("pie=%d relro=%d bindnow=%d nx=%d ssp=%d fortify=%d ibt=%d shstk=%d bti=%d pac=%d\n", p->pie,
                    p->relro, p->bind_now, p->nx_stack, p->stack_protector, p->fortify, p->cet_ibt, p->cet_shstk,
                    p->bti, p->pac);
        return 0;
    }
    if (mode == "plan" && argc > 3) {
        policy::HardeningPlan plan;
        std::string m = argv[2];
        plan.mte = m == "sync" ? policy::MteMode::Sync : m == "async" ? policy::MteMode::Async : policy::MteMode::Off;
        for (int i = 4; i < argc; ++i) plan.properties.push_back({argv[i], policy::Requirement::Require});
        int fd = ::open(argv[3], O_RDONLY | O_CLOEXEC);
        auto r = prepare_hardening(plan, fd, argv[3], "glibc.malloc.check=0", CpuFeatures::probe(), "/usr/aarch64-linux-gnu");
        if (!r) {
            std::printf("REFUSED %s\n", r.error().c_str());
            return 1;
        }
        std::printf("TUNABLES %s\n", r->glibc_tunables.c_str());
        for (const auto& l : r->in_force) std::printf("IN_FORCE %s\n", l.c_str());
        return 0;
    }
    if (mode == "env" && argc > 3) {
        policy::HardeningPlan plan;
        std::string m = argv[2];
        plan.mte = m == "sync" ? policy::MteMode::Sync : m == "async" ? policy::MteMode::Async : policy::MteMode::Off;
        std::vector<std::string> env;
        for (char** e = environ; *e; ++e) env.emplace_back(*e);
        int fd = ::open(argv[3], O_RDONLY | O_CLOEXEC);
        auto r = harden_env(env, plan, fd, argv[3], CpuFeatures::probe(), "/usr/aarch64-linux-gnu");
        if (!r) {
            std::printf("REFUSED %s\n", r.error().c_str());
            return 1;
        }
        for (const auto& kv : env)
            if (kv.starts_with("GLIBC_TUNABLES=")) std::printf("%s\n", kv.c_str());
        return 0;
    }
    return 2;
}
