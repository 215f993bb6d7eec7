#include "sandbox/ns_uts.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace bulwark {
int uts_child_set_hostname(const char* name) {
    return ::sethostname(name, std::strlen(name)) == 0 ? 0 : -errno;
}
}  // namespace bulwark
