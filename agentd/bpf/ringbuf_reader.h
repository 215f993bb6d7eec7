#pragma once
// Reader of the bw_events ring buffer: an epoll-able fd, one callback per
// bw_event, and counts. Enforcement never depends on this reader; events the
// kernel could not reserve are counted in bw_stats (PolicyMaps::stats()).
#include <bpf/libbpf.h>

#include <cstdint>
#include <expected>
#include <functional>
#include <memory>

#include <bulwark_abi.h>

#include "common/sys_error.h"

namespace bulwark::bpf {

class RingbufReader {
public:
    using Callback = std::function<void(const bw_event&)>;

    // events_map_fd: the bw_events map (PolicyMaps::events_fd()); the reader dups nothing,
    // the fd must outlive it.
    static std::expected<std::unique_ptr<RingbufReader>, SysError> create(int events_map_fd, Callback cb);

    int epoll_fd() const;                                    // readable when events wait
    std::expected<int, SysError> poll(int timeout_ms);       // waits, consumes; returns events handled
    std::expected<int, SysError> consume();                  // consumes what is there now

    uint64_t events() const { return events_; }
    uint64_t malformed() const { return malformed_; }        // records of the wrong size (ABI skew)

private:
    struct RbDeleter {
        void operator()(ring_buffer* rb) const { ring_buffer__free(rb); }
    };
    RingbufReader() = default;
    static int on_sample(void* self, void* data, size_t size);

    std::unique_ptr<ring_buffer, RbDeleter> rb_;
    Callback cb_;
    uint64_t events_ = 0;
    uint64_t malformed_ = 0;
};

}  // namespace bulwark::bpf
