// narrow_socket_families(): a compiled filter narrowed to fewer socket
// families, for a task's grant (grants.cpp).
//
// A grant narrows a compiled bundle: the tool's seccomp spec is not in it, so
// the filter cannot be compiled again with the narrower list, and libseccomp
// builds whole filters, not a check to put in front of one. The check is a
// few classic-BPF instructions written here; the result goes through the
// same kernel checker as every compiled program, and the evaluator and the
// kernel audit reader run it as they run any filter.
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <sys/socket.h>

#include <cstddef>

#include "bulwark/policy/cbpf.h"
#include "bulwark/policy/seccomp.h"
#include "seccomp_format.h"

namespace bulwark::policy {
namespace {

constexpr uint32_t kArchOffset = offsetof(seccomp_data, arch);
constexpr uint32_t kNrOffset = offsetof(seccomp_data, nr);
// The two 32-bit halves of args[0] as the kernel lays the u64 out.
constexpr uint32_t kArg0 = offsetof(seccomp_data, args);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
constexpr uint32_t kArg0Low = kArg0, kArg0High = kArg0 + 4;
#else
constexpr uint32_t kArg0Low = kArg0 + 4, kArg0High = kArg0;
#endif

sock_filter load(uint32_t offset) { return BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offset); }
sock_filter ret(uint32_t value) { return BPF_STMT(BPF_RET | BPF_K, value); }
sock_filter jeq(uint32_t k, size_t jt, size_t jf) {
    return BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, k, static_cast<uint8_t>(jt), static_cast<uint8_t>(jf));
}

}  // namespace

uint64_t socket_families_through(std::span<const sock_filter> prog, const char* call) {
    seccomp_data d{};
    d.nr = seccomp_syscall_resolve_name(call);
    d.arch = seccomp_arch_native();
    uint64_t through = 0;
    for (uint32_t family = 0; family < 64; ++family) {
        d.args[0] = family;
        for (uint64_t type : {SOCK_STREAM, SOCK_DGRAM, SOCK_RAW, SOCK_SEQPACKET}) {
            d.args[1] = type;
            const uint32_t act = seccomp_ret_action(run_seccomp_filter(prog, d));
            if (act == SECCOMP_RET_ALLOW || act == SECCOMP_RET_LOG) through |= uint64_t{1} << family;
        }
    }
    return through;
}

uint32_t netlink_protocols_through(std::span<const sock_filter> prog) {
    seccomp_data d{};
    d.nr = seccomp_syscall_resolve_name("socket");
    d.arch = seccomp_arch_native();
    d.args[0] = AF_NETLINK;
    uint32_t through = 0;
    for (uint32_t proto = 0; proto < 32; ++proto) {
        d.args[2] = proto;
        for (uint64_t type : {SOCK_RAW, SOCK_DGRAM}) {
            d.args[1] = type;
            const uint32_t act = seccomp_ret_action(run_seccomp_filter(prog, d));
            if (act == SECCOMP_RET_ALLOW || act == SECCOMP_RET_LOG) through |= uint32_t{1} << proto;
        }
    }
    return through;
}

std::expected<std::vector<sock_filter>, SeccompError> narrow_socket_families(std::span<const sock_filter> prog,
                                                                             uint64_t af_allow, bool audit) {
    const int socket_nr = seccomp_syscall_resolve_name("socket");
    const int pair_nr = seccomp_syscall_resolve_name("socketpair");
    if (socket_nr < 0 || pair_nr < 0) return std::unexpected(SeccompError{0, "socket(2) has no number on this ABI"});
    std::vector<uint32_t> families;
    for (uint32_t f = 0; f < 64; ++f)
        if ((af_allow >> f) & 1) families.push_back(f);
    // Layout (jump offsets count from the next instruction):
    //   0 arch; 1 native? else -> filter; 2 nr; 3 socket? -> 5; 4 socketpair? else -> filter;
    //   5 args[0] high half; 6 zero? else -> refuse; 7 args[0] low half;
    //   8.. one jeq per listed family -> filter; refuse: the refusal; then the filter.
    const size_t refuse = 8 + families.size(), filter = refuse + 1;
    auto to = [](size_t from, size_t target) { return target - from - 1; };
    std::vector<sock_filter> out;
    out.push_back(load(kArchOffset));
    out.push_back(jeq(seccomp_arch_native(), 0, to(1, filter)));
    out.push_back(load(kNrOffset));
    out.push_back(jeq(static_cast<uint32_t>(socket_nr), to(3, 5), 0));
    out.push_back(jeq(static_cast<uint32_t>(pair_nr), 0, to(4, filter)));
    out.push_back(load(kArg0High));
    out.push_back(jeq(0, 0, to(6, refuse)));
    out.push_back(load(kArg0Low));
    for (size_t i = 0; i < families.size(); ++i) out.push_back(jeq(families[i], to(8 + i, filter), 0));
    out.push_back(ret(audit ? SECCOMP_RET_LOG : SECCOMP_RET_ERRNO | EPERM));
    out.insert(out.end(), prog.begin(), prog.end());
    if (out.size() > BPF_MAXINSNS)
        return std::unexpected(SeccompError{0, detail::format("the narrowed seccomp program has {} instructions; the "
                                                              "kernel accepts at most {}",
                                                              out.size(), BPF_MAXINSNS)});
    if (auto ok = check_seccomp_filter(out); !ok)
        return std::unexpected(SeccompError{0, "the narrowed seccomp program fails the kernel's checks: instruction " +
                                                   std::to_string(ok.error().pc) + ": " + ok.error().message});
    return out;
}

}  // namespace bulwark::policy
