#include "sandbox/ns_net.h"

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

#include <fcntl.h>
#include <sched.h>

#include <cstdlib>
#include <thread>

namespace bulwark {

NetnsPool& NetnsPool::instance() {
    static NetnsPool pool;
    return pool;
}

std::optional<Fd> NetnsPool::acquire(std::string& error) {
    {
        std::lock_guard lk(mu_);
        if (!free_.empty()) {
            Fd fd = std::move(free_.back());
            free_.pop_back();
            return fd;
        }
    }
    // Make one in a short-lived thread so this thread's netns never changes.
    int out = -1, err = 0;
    const char* step = "";
    std::thread t([&] {
        if (::unshare(CLONE_NEWNET) != 0) {
            err = errno;
            step = "unshare(CLONE_NEWNET)";
            return;
        }
        if (int rc = net_child_loopback_up(); rc != 0) {
            err = -rc;
            step = "ioctl(SIOCSIFFLAGS, lo up)";
            return;
        }
        out = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        if (out < 0) {
            err = errno;
            step = "open(/proc/thread-self/ns/net)";
        }
    });
    t.join();
    if (out < 0) {
        error = std::string(step) + ": " + std::strerror(err);
        return std::nullopt;
    }
    return Fd(out);
}

void NetnsPool::release(Fd netns) {
    if (!netns) return;
    std::lock_guard lk(mu_);
    if (free_.size() < kMaxFree) free_.push_back(std::move(netns));
}

bool enter_thread_netns(int netns, int& saved_own) {
    saved_own = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (saved_own < 0) return false;
    if (::setns(netns, CLONE_NEWNET) != 0) {
        int e = errno;
        ::close(saved_own);
        errno = e;
        return false;
    }
    return true;
}

void leave_thread_netns(int saved_own) {
    if (::setns(saved_own, CLONE_NEWNET) != 0) std::abort();  // never run on in a tool's netns
    ::close(saved_own);
}

}  // namespace bulwark
