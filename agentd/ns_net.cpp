#include "ns_net.h"

#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace bulwark {

int net_child_loopback_up() {
    int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) return -errno;
    ifreq ifr{};
    std::memcpy(ifr.ifr_name, "lo", 3);
    int rc = ::ioctl(s, SIOCGIFFLAGS, &ifr);
    if (rc == 0) {
        ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP | IFF_RUNNING);
        rc = ::ioctl(s, SIOCSIFFLAGS, &ifr);
    }
    int saved = errno;
    ::close(s);
    return rc == 0 ? 0 : -saved;
}

}  // namespace bulwark
