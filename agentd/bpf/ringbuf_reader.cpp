#include "bpf/ringbuf_reader.h"

#include <cerrno>
#include <cstring>

namespace bulwark::bpf {

std::expected<std::unique_ptr<RingbufReader>, SysError> RingbufReader::create(int events_map_fd, Callback cb) {
    std::unique_ptr<RingbufReader> r(new RingbufReader());
    r->cb_ = std::move(cb);
    ring_buffer* rb = ring_buffer__new(events_map_fd, &RingbufReader::on_sample, r.get(), nullptr);
    if (!rb) return std::unexpected(SysError{"ring_buffer__new(bw_events)", errno});
    r->rb_.reset(rb);
    return r;
}

int RingbufReader::on_sample(void* self, void* data, size_t size) {
    auto* r = static_cast<RingbufReader*>(self);
    if (size < sizeof(bw_event)) {
        ++r->malformed_;
        return 0;
    }
    bw_event e;
    std::memcpy(&e, data, sizeof(e));
    ++r->events_;
    if (r->cb_) r->cb_(e);
    return 0;
}

int RingbufReader::epoll_fd() const { return ring_buffer__epoll_fd(rb_.get()); }

std::expected<int, SysError> RingbufReader::poll(int timeout_ms) {
    int n = ring_buffer__poll(rb_.get(), timeout_ms);
    if (n < 0 && n != -EINTR) return std::unexpected(SysError{"ring_buffer__poll(bw_events)", -n});
    return n < 0 ? 0 : n;
}

std::expected<int, SysError> RingbufReader::consume() {
    int n = ring_buffer__consume(rb_.get());
    if (n < 0) return std::unexpected(SysError{"ring_buffer__consume(bw_events)", -n});
    return n;
}

}  // namespace bulwark::bpf
