// libFuzzer target: any bytes as a Docker / OCI runtime-spec seccomp profile
// (policy-compiler/src/seccomp_import.cpp: what `syscalls.baseline.import`
// of a rule file and `policyc import-seccomp` read, the profile format of
// an engine's linux.seccomp). Every profile it accepts is exported back as
// an OCI linux.seccomp object (export_oci_seccomp, what bulwark-oci writes
// into a container's spec). Invariants beyond "no crash, no sanitizer
// report": an accepted profile's export is a JSON object whose every rule
// names at least one syscall.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "bulwark/policy/seccomp.h"

using namespace bulwark::policy;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    auto spec = import_seccomp_profile(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.json");
    if (!spec) return 0;
    (void)compile_seccomp(*spec);  // the native program, through libseccomp
    auto oci = export_oci_seccomp(*spec);
    if (!oci) return 0;
    if (!oci->is_object()) std::abort();
    if (oci->contains("syscalls"))
        for (const auto& r : (*oci)["syscalls"])
            if (!r.contains("names") || r["names"].empty()) std::abort();
    return 0;
}
