// libFuzzer target: any bytes as a stream of kernel audit records (the
// kernel audit source's parser, agentd/kaudit/kernel_audit_parse.cpp). Input: lines
// "<type byte><body>"; the assembler must never crash, every record must be
// counted exactly once (parsed, malformed or of another type), and after a
// flush nothing may stay pending.
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "kaudit/kernel_audit_parse.h"

using namespace bulwark::kaudit;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static constexpr uint16_t kTypes[] = {rtype::kSyscall, rtype::kPath, rtype::kCwd, rtype::kEoe,
                                          rtype::kSeccomp, rtype::kProctitle, rtype::kLandlockAccess,
                                          rtype::kLandlockDomain, 1400, rtype::kTrustedApp};
    EventAssembler a(8, 8);
    std::vector<KernelDenial> out;
    std::string_view in(reinterpret_cast<const char*>(data), size);
    uint64_t fed = 0;
    int64_t t = 0;
    while (!in.empty()) {
        uint16_t type = kTypes[static_cast<uint8_t>(in[0]) % (sizeof kTypes / sizeof kTypes[0])];
        in.remove_prefix(1);
        size_t nl = in.find('\n');
        std::string_view body = in.substr(0, nl);
        in = nl == std::string_view::npos ? std::string_view() : in.substr(nl + 1);
        a.feed(type, body, t++, out);
        ++fed;
        if (t % 16 == 0) a.flush_older(t - 8, out);
    }
    a.flush_all(out);
    if (a.pending() != 0 || a.stats().records != fed) std::abort();
    if (a.stats().denials != out.size()) std::abort();
    return 0;
}
