// How often libseccomp fails the compiler on random socket(2) rule mixes:
// each mix of tests/unit/seccomp_model.h's random_socket_spec compiled in a
// child under a time limit, counted as compiled, refused for needing more
// rules than the per-syscall bound, refused as built wrongly by libseccomp in
// both forms, or not returned (libseccomp's endless rule-tree loop).
//   seccomp_mix_bench [FIRST_SEED [LAST_SEED [MIXES_PER_SEED [LIMIT_S]]]]
// Default: seeds 7..30, 200 mixes each, 2 s per compile.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <random>

#include "../unit/seccomp_model.h"

int main(int argc, char** argv) {
    const uint64_t first = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 7;
    const uint64_t last = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 30;
    const int mixes = argc > 3 ? std::atoi(argv[3]) : 200;
    const unsigned limit = argc > 4 ? static_cast<unsigned>(std::atoi(argv[4])) : 2;
    int compiled = 0, too_many = 0, built_wrongly = 0, endless = 0;
    for (uint64_t seed = first; seed <= last; ++seed) {
        std::mt19937_64 rng(seed);
        for (int i = 0; i < mixes; ++i) {
            const auto spec = bulwark::test::random_socket_spec(rng);
            std::fflush(stdout);
            const pid_t pid = fork();
            if (pid < 0) return 2;
            if (pid == 0) {
                alarm(limit);
                auto plan = bulwark::policy::compile_seccomp(spec);
                if (plan) _exit(0);
                _exit(plan.error().message.find("more than") != std::string::npos ? 2 : 1);
            }
            int status = 0;
            if (waitpid(pid, &status, 0) != pid) return 2;
            if (WIFSIGNALED(status)) {
                ++endless;
                std::printf("seed %llu mix %d: no result in %u s\n", static_cast<unsigned long long>(seed), i, limit);
            } else if (WEXITSTATUS(status) == 0) {
                ++compiled;
            } else if (WEXITSTATUS(status) == 2) {
                ++too_many;
            } else {
                ++built_wrongly;
            }
        }
    }
    const int total = compiled + too_many + built_wrongly + endless;
    std::printf("random socket rule mixes: %d (seeds %llu..%llu x %d)\n", total,
                static_cast<unsigned long long>(first), static_cast<unsigned long long>(last), mixes);
    std::printf("  compiled                       : %d\n", compiled);
    std::printf("  refused, over the rule bound   : %d\n", too_many);
    std::printf("  refused, built wrongly         : %d\n", built_wrongly);
    std::printf("  no result in %u s (libseccomp) : %d\n", limit, endless);
    return 0;
}
