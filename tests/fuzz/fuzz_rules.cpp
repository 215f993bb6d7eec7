// libFuzzer target: any bytes as a rule file. The compiler must never crash,
// hang or hand out a bundle together with an error; every bundle it does
// hand out must survive the JSON round trip with the same hash.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "bulwark/policy/compiler.h"

using namespace bulwark::policy;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const CompileOptions opts = [] {
        CompileOptions o;
        o.seccomp_compiler = [](const SeccompSpec&) -> std::expected<SeccompPlan, SeccompError> {
            return SeccompPlan{};
        };
        return o;
    }();
    auto r = compile_string(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.yaml", opts);
    bool has_error = count_errors(r.diagnostics) > 0;
    if (has_error == r.bundle.has_value()) std::abort();
    (void)render_diagnostics(r);
    if (r.bundle) {
        auto back = bundle_from_json(bundle_to_json(*r.bundle));
        if (!back || back->hash != r.bundle->hash) std::abort();
    }
    return 0;
}
