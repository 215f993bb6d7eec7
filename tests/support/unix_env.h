#pragma once
// Shared by the unix-socket cases of the BPF host tier and its differential
// tier: the programs' state on this kernel, and the address form of rules.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/un.h>

#include <cstddef>
#include <cstring>
#include <string>

#include "bpf_env.h"

namespace bwtest {

// False (with a warning) only where the kernel has no cgroup unix hooks;
// anywhere else both programs must be enforcing.
inline bool unix_programs_enforcing() {
    for (const char* p : {"bw_connect_unix", "bw_sendmsg_unix"}) {
        const auto* s = Env::get().loader().program(p);
        REQUIRE(s);
        if (s->state == bulwark::bpf::ProgState::Unavailable && s->reason.starts_with("hook not in this kernel")) {
            WARN(s->line());
            return false;
        }
        INFO(s->line());
        REQUIRE(s->state == bulwark::bpf::ProgState::Enforcing);
    }
    return true;
}

// "/path" or "@abstract" -> sockaddr_un and its length.
inline socklen_t unix_sockaddr(const std::string& a, sockaddr_un& sa) {
    std::memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    if (a.starts_with("@")) {
        std::memcpy(sa.sun_path + 1, a.data() + 1, a.size() - 1);
        return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + a.size());
    }
    std::memcpy(sa.sun_path, a.data(), a.size());
    return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + a.size() + 1);
}

}  // namespace bwtest
