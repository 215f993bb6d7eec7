// bulwark-oci: an OCI runtime (runc's command line) that confines annotated
// containers with Bulwark policies (oci/runtime.h).
#include <string>
#include <vector>

#include "oci/runtime.h"

int main(int argc, char** argv) {
    std::vector<std::string> words(argv + 1, argv + argc);
    return bulwark::oci::run_runtime(words);
}
