#pragma once
// Shared set-up for the BPF host tier: one loader per test process (own pin
// root and sandbox parent, removed at exit), sandbox leaf cgroups, children
// run inside them, and the events they caused.
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <bulwark_abi.h>

#include "bpf/bpf_loader.h"
#include "bulwark/policy/bundle.h"
#include "bpf/ringbuf_reader.h"

namespace bwtest {

using bulwark::bpf::BpfLoader;
using bulwark::bpf::PolicyHandle;
using bulwark::policy::BpfTables;

class Env {
public:
    static Env& get();
    BpfLoader& loader() { return *loader_; }
    bulwark::bpf::PolicyMaps& maps() { return loader_->maps(); }
    // Events read so far and not yet taken (all cgroups).
    std::vector<bw_event> drain();
    // Events of one cgroup, draining first.
    std::vector<bw_event> events_of(uint64_t cgid);
    int epoll_fd() const { return reader_->epoll_fd(); }
    std::string pin_root, parent;
    ~Env();

private:
    Env();
    std::unique_ptr<BpfLoader> loader_;
    std::unique_ptr<bulwark::bpf::RingbufReader> reader_;
    std::vector<bw_event> pending_;
};

// A sandbox leaf cgroup below the loader's parent, removed on destruction.
struct Leaf {
    explicit Leaf(const std::string& name);
    Leaf(const std::string& parent_dir, const std::string& name);
    ~Leaf();
    std::string path;
    uint64_t id = 0;
};

// Forks; the child joins `cgroup_path` and returns fn()'s value as its exit code.
int run_in(const std::string& cgroup_path, const std::function<int()>& fn);
// Same, without waiting: returns the child's pid.
pid_t spawn_in(const std::string& cgroup_path, const std::function<int()>& fn);
int wait_exit(pid_t pid);

// Memory shared with children (MAP_SHARED), zeroed.
template <class T>
T* shared(size_t n = 1);

// Policy building.
BpfTables net_policy(uint32_t flags, uint32_t mode = BW_MODE_ENFORCE);
struct Range {
    uint16_t lo, hi;
    uint8_t proto = BW_PROTO_TCP | BW_PROTO_UDP;
    uint8_t ops = BW_NET_CONNECT;
    uint8_t action = BW_NET_ACTION_ALLOW;
    uint32_t rule_id = 0;
};
// cidr "127.0.0.0/8" or "::1/128"
void add_net(BpfTables& t, const std::string& cidr, std::vector<Range> ranges);

PolicyHandle load(const BpfTables& t);

// Socket helpers returning 0 or errno.
int tcp_connect(const std::string& ip, uint16_t port);
int udp_connect(const std::string& ip, uint16_t port);
int udp_sendto(const std::string& ip, uint16_t port);
int bind_to(int family, int type, const std::string& ip, uint16_t port);

// A listening TCP socket on the wildcard address of `family`, ephemeral port.
struct Listener {
    explicit Listener(int family, int type = 1 /* SOCK_STREAM */);
    ~Listener();
    int fd = -1;
    uint16_t port = 0;
};

void v6_of(const std::string& ip, uint8_t out[16]);  // v4 -> v4-mapped

}  // namespace bwtest

#include <sys/mman.h>
template <class T>
T* bwtest::shared(size_t n) {
    void* p = mmap(nullptr, sizeof(T) * n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : static_cast<T*>(p);
}
