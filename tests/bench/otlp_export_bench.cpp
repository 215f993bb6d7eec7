// OTLP export benchmark (telemetry/otlp_exporter): decision records exported
// to an OTLP/HTTP sink in this process (a Beast server on its own thread that
// counts the log records of each request it is sent, answering 200).
//
//  1. Export rate, zero loss, the exporter on one core: the exporter's thread
//     pinned to CPU 0, the publisher (the bus, as the store's writer thread
//     calls it) and the sink on CPU 1; N records published in the store's
//     batch size; the time until the sink has counted all N, with no drop.
//     Also the exporter thread's CPU time (records per CPU-second of its
//     core) and the publisher's cost per record (what the writer thread pays).
//     Both encodings.
//  2. The audit store's throughput with the exporter on vs off: the same
//     rows through AuditStore (enqueue -> writer -> committed), its event bus
//     with or without the exporter subscribed, interleaved rounds, medians
//     and the ratio (target >= 0.9x). No pinning: the daemon's threads float.
//
//   otlp_export_bench [--rows N] [--rounds R] [--store-rows N] [--dir DIR] [--only export|store]
//                     [--encoding protobuf|json]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "audit/audit_db.h"
#include "bench_stats.h"
#include "audit/audit_record.h"
#include "audit/event_bus.h"
#include "audit/metrics.h"
#include "telemetry/otlp_exporter.h"

using namespace bulwark;
using namespace bulwark::audit;
using namespace bulwark::telemetry;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

namespace {

AuditRecord synth(uint64_t i, int64_t t0) {
    static const char* tools[] = {"git", "python3", "npm", "curl"};
    AuditRecord r;
    r.kind = RecordKind::Decision;
    r.ts_ns = t0 + int64_t(i);
    r.task_id = 1 + i % 8;
    r.run_id = 100 + i % 32;
    r.tool = tools[i % 4];
    r.policy_version = 3;
    if (i % 4 == 0) {
        r.rule_id = uint32_t(i % 50);
        r.rule_file = "/usr/local/share/bulwark/rules/python3.yaml";
        r.rule_line = uint32_t(10 + i % 40);
        r.rule_text = "read: [\"${workdir}\", /usr/lib/python3]";
    }
    r.layer = i % 3 ? BW_LAYER_BPF_LSM : BW_LAYER_MONITOR;
    r.op = BW_OP_FILE_OPEN;
    r.object = "/home/agent/work/src/module_" + std::to_string(i % 997) + ".py";
    r.decision = i % 100 == 0 ? BW_DECISION_DENY : (i % 3 ? BW_DECISION_ALLOW : BW_DECISION_OBSERVE);
    r.err = r.decision == BW_DECISION_DENY ? EACCES : 0;
    r.pid = 1000 + uint32_t(i % 64);
    r.comm = "python3";
    r.detail = R"({"dev":2049,"ino":1234567,"rights":1})";
    return r;
}

// ---- the sink ----------------------------------------------------------------
size_t varint(std::string_view s, size_t& i) {
    size_t v = 0;
    for (int shift = 0; i < s.size(); shift += 7) {
        auto b = uint8_t(s[i++]);
        v |= size_t(b & 0x7f) << shift;
        if (!(b & 0x80)) break;
    }
    return v;
}
// Length-delimited fields `number` of a message, as views.
std::vector<std::string_view> children(std::string_view s, unsigned number) {
    std::vector<std::string_view> out;
    size_t i = 0;
    while (i < s.size()) {
        size_t tag = varint(s, i);
        unsigned wire = tag & 7;
        if (wire == 0) varint(s, i);
        else if (wire == 1) i += 8;
        else if (wire == 5) i += 4;
        else if (wire == 2) {
            size_t n = varint(s, i);
            if ((tag >> 3) == number) out.push_back(s.substr(i, n));
            i += n;
        } else break;
    }
    return out;
}
size_t count_log_records(const std::string& body, bool json) {
    if (json) {
        size_t n = 0;
        for (size_t p = body.find("\"timeUnixNano\""); p != std::string::npos; p = body.find("\"timeUnixNano\"", p + 1))
            ++n;
        return n;
    }
    size_t n = 0;
    for (auto rl : children(body, 1))
        for (auto sl : children(rl, 2)) n += children(sl, 2).size();
    return n;
}

// A minimal OTLP/HTTP sink: each request's headers, then its body read
// whole (Content-Length) in one call, the log records counted, a fixed 200.
// As cheap as a receiver can be, so the exporter is what is measured.
class Sink {
public:
    Sink() {
        lfd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int one = 1;
        ::setsockopt(lfd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::bind(lfd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(lfd_, 4) != 0) {
            std::perror("sink: bind/listen");
            std::exit(1);
        }
        socklen_t n = sizeof a;
        ::getsockname(lfd_, reinterpret_cast<sockaddr*>(&a), &n);
        port_ = ntohs(a.sin_port);
    }
    void start() { thread_ = std::thread([this] { serve(); }); }
    ~Sink() {
        stop_ = true;
        ::shutdown(lfd_, SHUT_RDWR);  // wakes the blocked accept()
        if (thread_.joinable()) thread_.join();
        ::close(lfd_);
    }
    std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1/logs"; }
    std::atomic<uint64_t> records{0}, bytes{0}, requests{0};

private:
    void serve() {
        std::string buf;
        while (!stop_) {
            int fd = ::accept4(lfd_, nullptr, nullptr, SOCK_CLOEXEC);
            if (fd < 0) return;
            size_t have = 0;
            buf.resize(1 << 16);
            for (;;) {
                // the head
                size_t end = std::string::npos;
                while ((end = std::string_view(buf.data(), have).find("\r\n\r\n")) == std::string::npos) {
                    if (have == buf.size()) buf.resize(buf.size() * 2);
                    ssize_t n = ::recv(fd, buf.data() + have, buf.size() - have, 0);
                    if (n <= 0) goto done;
                    have += size_t(n);
                }
                std::string_view head(buf.data(), end);
                auto cl = head.find("Content-Length: ");
                size_t len = cl == std::string_view::npos ? 0 : std::stoull(std::string(head.substr(cl + 16, 20)));
                bool json = head.find("Content-Type: application/json") != std::string_view::npos;
                size_t total = end + 4 + len;
                if (buf.size() < total) buf.resize(total);
                while (have < total) {  // the body, whole
                    ssize_t n = ::recv(fd, buf.data() + have, total - have, MSG_WAITALL);
                    if (n <= 0) goto done;
                    have += size_t(n);
                }
                records += count_log_records(std::string(buf.data() + end + 4, len), json);
                bytes += len;
                ++requests;
                static const char kOk[] = "HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n";
                if (::send(fd, kOk, sizeof kOk - 1, MSG_NOSIGNAL) < 0) break;
                std::memmove(buf.data(), buf.data() + total, have - total);
                have -= total;
            }
        done:
            ::close(fd);
        }
    }
    int lfd_ = -1;
    uint16_t port_ = 0;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

// CPU seconds of this process's thread named `name` (/proc/self/task/*/comm).
double thread_cpu(const std::string& name) {
    for (auto& t : fs::directory_iterator("/proc/self/task")) {
        std::ifstream c(t.path() / "comm");
        std::string comm;
        std::getline(c, comm);
        if (comm != name) continue;
        std::ifstream st(t.path() / "stat");
        std::string line;
        std::getline(st, line);
        auto rp = line.rfind(')');
        std::vector<std::string> f;
        std::string tok;
        for (char ch : line.substr(rp + 2)) {
            if (ch == ' ') f.push_back(tok), tok.clear();
            else tok += ch;
        }
        // fields after ")": state(0) ... utime(11) stime(12)
        return double(std::stoull(f.at(11)) + std::stoull(f.at(12))) / double(sysconf(_SC_CLK_TCK));
    }
    return -1;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

struct ExportFigures {
    double rate = 0, per_cpu = 0, exporter_cpu = 0, publish_ns = 0, bytes_per_record = 0;
    uint64_t dropped = 0, counted = 0, requests = 0;
};

// 1: N records through the bus to the exporter pinned on CPU 0.
ExportFigures export_rate(uint64_t rows, OtlpEncoding enc) {
    Sink sink;
    ExportFigures f;
    std::vector<AuditRecord> all;
    all.reserve(rows);
    int64_t t0ns = realtime_now_ns();
    for (uint64_t i = 0; i < rows; ++i) all.push_back(synth(i, t0ns)), all.back().seq = i + 1;
    Metrics m;
    EventBus bus(&m);
    OtlpOptions o;
    o.endpoint = *parse_endpoint(sink.url());
    o.encoding = enc;
    o.queue_capacity = rows;  // zero loss: the whole burst fits
    pin(0);  // the exporter's thread inherits CPU 0
    OtlpExporter ex(o, bus, nullptr, &m);
    pin(1);  // the publisher and the sink: CPU 1
    sink.start();
    const double cpu0 = thread_cpu("otlp-export");
    auto t0 = Clock::now();
    double publish_s = 0;
    const size_t batch = 8192;  // the store's batch_rows
    for (size_t i = 0; i < all.size(); i += batch) {
        auto p0 = Clock::now();
        // as the store hands over a committed batch: records moved, not copied
        bus.on_committed_owned(std::span<AuditRecord>(all.data() + i, std::min(batch, all.size() - i)));
        publish_s += std::chrono::duration<double>(Clock::now() - p0).count();
    }
    ex.flush(std::chrono::minutes(5));
    while (sink.records < rows && Clock::now() - t0 < std::chrono::minutes(1)) std::this_thread::yield();
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    f.exporter_cpu = thread_cpu("otlp-export") - cpu0;
    f.rate = double(rows) / secs;
    f.per_cpu = double(rows) / f.exporter_cpu;
    f.publish_ns = publish_s * 1e9 / double(rows);
    for (auto& d : m.otlp_dropped) f.dropped += d.load();
    f.counted = sink.records;
    f.requests = sink.requests;
    f.bytes_per_record = double(sink.bytes) / double(rows);
    ex.stop();
    cpu_set_t any;
    CPU_ZERO(&any);
    for (int c = 0; c < CPU_SETSIZE; ++c) CPU_SET(c, &any);
    pthread_setaffinity_np(pthread_self(), sizeof any, &any);
    return f;
}

struct StoreRound {
    double rate = 0;
    uint64_t exported = 0, dropped = 0;
};

// 2: the store's rows/s with or without the exporter on its bus.
StoreRound store_round(const fs::path& db, uint64_t rows, Sink* sink) {
    std::error_code ec;
    fs::remove(db, ec);
    fs::remove(db.string() + "-wal", ec);
    fs::remove(db.string() + "-shm", ec);
    Metrics m;
    EventBus bus(&m);
    std::unique_ptr<OtlpExporter> ex;
    if (sink) {
        OtlpOptions o;
        o.endpoint = *parse_endpoint(sink->url());
        ex = std::make_unique<OtlpExporter>(o, bus, nullptr, &m);
    }
    auto s = AuditStore::open(bulwark::bench::bench_store_options(db), &m, &bus);
    if (!s) {
        std::fprintf(stderr, "open: %s\n", s.error().message.c_str());
        std::exit(1);
    }
    std::vector<AuditRecord> recs;
    recs.reserve(rows);
    int64_t t0ns = realtime_now_ns();
    for (uint64_t i = 0; i < rows; ++i) recs.push_back(synth(i, t0ns));
    auto t0 = Clock::now();
    for (auto& r : recs) (*s)->enqueue(std::move(r));
    (*s)->flush(std::chrono::minutes(5));
    StoreRound out;
    out.rate = double(rows) / std::chrono::duration<double>(Clock::now() - t0).count();
    if (ex) {
        ex->flush(std::chrono::minutes(2));
        out.exported = m.otlp_records_exported;
        for (auto& d : m.otlp_dropped) out.dropped += d.load();
        ex->stop();
    }
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    // Short store rounds, many of them: on a shared machine the load moves
    // within seconds, and paired rounds see the same load.
    uint64_t rows = 200000, store_rows = 40000;
    int rounds = 31;
    std::string only, encoding;
    fs::path dir = fs::temp_directory_path() / ("otlp-bench-" + std::to_string(getpid()));
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--rows" && i + 1 < argc) rows = std::stoull(argv[++i]);
        else if (a == "--rounds" && i + 1 < argc) rounds = std::stoi(argv[++i]);
        else if (a == "--store-rows" && i + 1 < argc) store_rows = std::stoull(argv[++i]);
        else if (a == "--dir" && i + 1 < argc) dir = argv[++i];
        else if (a == "--only" && i + 1 < argc) only = argv[++i];
        else if (a == "--encoding" && i + 1 < argc) encoding = argv[++i];
        else {
            std::fprintf(stderr, "usage: otlp_export_bench [--rows N] [--rounds R] [--dir DIR] [--store-rows N] [--only export|store] [--encoding protobuf|json]\n");
            return 2;
        }
    }
    spdlog::set_level(spdlog::level::err);
    std::printf("otlp_export_bench: %llu records, %d store rounds, %ld CPUs, load %s\n", (unsigned long long)rows,
                rounds, sysconf(_SC_NPROCESSORS_ONLN), [] {
                    static char b[64] = "?";
                    if (FILE* f = std::fopen("/proc/loadavg", "r")) {
                        if (!std::fgets(b, sizeof b, f)) b[0] = 0;
                        std::fclose(f);
                        if (char* nl = std::strchr(b, '\n')) *nl = 0;
                    }
                    return b;
                }());

    if (only != "store") {
    std::printf("\n1. export rate, zero loss, the exporter's thread alone on CPU 0 (publisher and sink on CPU 1)\n");
    std::printf("   %-9s %12s %14s %12s %12s %10s %9s %8s\n", "encoding", "records/s", "per CPU-second",
                "exporter CPU", "publish/rec", "bytes/rec", "requests", "dropped");
    export_rate(rows / 4, OtlpEncoding::Protobuf);  // warm-up: the heap grown once, not in a measured run
    for (auto enc : {OtlpEncoding::Protobuf, OtlpEncoding::Json}) {
        if (!encoding.empty() && encoding != encoding_name(enc)) continue;
        std::vector<ExportFigures> fs_;
        for (int r = 0; r < 3; ++r) fs_.push_back(export_rate(rows, enc));
        std::sort(fs_.begin(), fs_.end(), [](auto& a, auto& b) { return a.rate < b.rate; });
        auto& f = fs_[1];  // the median of three
        bool lossless = std::all_of(fs_.begin(), fs_.end(), [&](auto& x) { return x.dropped == 0 && x.counted == rows; });
        std::printf("   %-9s %12.0f %14.0f %11.2fs %9.0f ns %10.0f %9llu %8s\n", std::string(encoding_name(enc)).c_str(),
                    f.rate, f.per_cpu, f.exporter_cpu, f.publish_ns, f.bytes_per_record,
                    (unsigned long long)f.requests, lossless ? "0" : "LOSS");
    }
    }
    if (only == "export") return 0;
    fs::create_directories(dir);  // the store rounds' databases

    std::printf("\n2. audit store throughput, exporter on vs off (%llu rows a round, interleaved, medians)\n",
                (unsigned long long)store_rows);
    Sink sink;
    sink.start();
    std::vector<double> off, on, paired;
    uint64_t exported = 0, dropped = 0;
    for (int r = 0; r < rounds; ++r) {
        off.push_back(store_round(dir / "off.db", store_rows, nullptr).rate);
        auto o = store_round(dir / "on.db", store_rows, &sink);
        on.push_back(o.rate);
        paired.push_back(o.rate / off.back());
        exported += o.exported;
        dropped += o.dropped;
    }
    std::printf("   exporter off: %9.0f rows/s   (rounds:", median(off));
    for (double x : off) std::printf(" %.0f", x);
    std::printf(")\n   exporter on:  %9.0f rows/s   (rounds:", median(on));
    for (double x : on) std::printf(" %.0f", x);
    std::printf(")\n   ratio on/off: %.3fx of the medians, %.3fx the median of the rounds' ratios (target >= 0.9x); "
                "exported %llu of %llu, dropped %llu\n",
                median(on) / median(off), median(paired), (unsigned long long)exported, (unsigned long long)(store_rows * rounds),
                (unsigned long long)dropped);
    std::error_code ec;
    fs::remove_all(dir, ec);
    return 0;
}
