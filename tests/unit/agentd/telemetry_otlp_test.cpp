// agentd/telemetry: an audit record as an OTLP log record (OCSF class,
// attributes, trace context, container), both OTLP encodings, the answer's
// partial success, the endpoint URL and Retry-After, and the exporter
// against an HTTP endpoint in this process (retries, Retry-After, refusals, a
// dead endpoint, a full queue, trace context looked up in the store). The
// payloads are checked with the official OpenTelemetry decoder in the
// otlp_export tier (tests/telemetry); here a small wire-format reader walks
// the protobuf body. No root, no daemon.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "audit/audit_db.h"
#include "audit/event_bus.h"
#include "audit/metrics.h"
#include "common/digest.h"
#include "common/trace_context.h"
#include "telemetry/ocsf.h"
#include "telemetry/otlp_encode.h"
#include "telemetry/otlp_exporter.h"
#include "telemetry/otlp_http.h"
#include "telemetry/otlp_log.h"

using namespace bulwark;
using namespace bulwark::telemetry;
using audit::AuditRecord;
using audit::RecordKind;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

const char* kTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

AuditRecord file_denial() {
    AuditRecord r;
    r.kind = RecordKind::Decision;
    r.seq = 41;
    r.ts_ns = 1'700'000'000'123'456'789;
    r.task_id = 3;
    r.run_id = 7;
    r.tool = "cat";
    r.policy_version = 2;
    r.rule_id = 4;
    r.rule_file = "rules/cat.yaml";
    r.rule_line = 12;
    r.rule_text = "deny: [/etc/shadow]";
    r.layer = BW_LAYER_LANDLOCK;
    r.op = BW_OP_FILE_OPEN;
    r.object = "/etc/shadow";
    r.decision = BW_DECISION_DENY;
    r.err = EACCES;
    r.pid = 4242;
    r.comm = "cat";
    return r;
}

// A connect decision with its object written by the store's own renderer.
AuditRecord connect_record(const char* ip4, uint16_t port, uint8_t decision) {
    bw_event ev{};
    ev.obj_kind = BW_OBJ_NET;
    ev.obj.net.type = SOCK_STREAM;
    ev.obj.net.family = AF_INET;
    ev.obj.net.port = port;
    std::memset(ev.obj.net.addr + 10, 0xff, 2);
    REQUIRE(inet_pton(AF_INET, ip4, ev.obj.net.addr + 12) == 1);
    AuditRecord r;
    r.kind = RecordKind::Decision;
    r.seq = 50;
    r.ts_ns = 1'700'000'000'000'000'000;
    r.task_id = 3;
    r.run_id = 7;
    r.tool = "curl";
    r.rule_id = BW_NO_RULE;
    r.layer = BW_LAYER_SOCK_ADDR;
    r.op = BW_OP_CONNECT;
    r.object = audit::render_object(ev);
    r.decision = decision;
    r.err = decision == BW_DECISION_DENY ? EPERM : 0;
    return r;
}

std::string str(const LogRecord& lr, std::string_view key) {
    auto* v = lr.find(key);
    if (!v) return "<missing " + std::string(key) + ">";
    return std::string(v->text());
}
int64_t num(const LogRecord& lr, std::string_view key) {
    auto* v = lr.find(key);
    return v && v->kind == AttrValue::Kind::Int ? v->i : -1;
}

// ---- a small protobuf wire-format reader (the tests' own) ----------------
struct Field {
    unsigned number = 0, wire = 0;
    uint64_t value = 0;     // varint, fixed32, fixed64
    std::string_view bytes;  // length-delimited
};
std::vector<Field> fields(std::string_view s) {
    std::vector<Field> out;
    size_t i = 0;
    auto varint = [&] {
        uint64_t v = 0;
        for (int shift = 0; i < s.size(); shift += 7) {
            auto b = uint8_t(s[i++]);
            v |= uint64_t(b & 0x7f) << shift;
            if (!(b & 0x80)) return v;
        }
        FAIL("truncated varint");
        return v;
    };
    while (i < s.size()) {
        Field f;
        uint64_t tag = varint();
        f.number = unsigned(tag >> 3);
        f.wire = unsigned(tag & 7);
        if (f.wire == 0) {
            f.value = varint();
        } else if (f.wire == 1 || f.wire == 5) {
            size_t n = f.wire == 1 ? 8 : 4;
            REQUIRE(i + n <= s.size());
            for (size_t k = 0; k < n; ++k) f.value |= uint64_t(uint8_t(s[i + k])) << (8 * k);
            i += n;
        } else if (f.wire == 2) {
            uint64_t n = varint();
            REQUIRE(n <= s.size() - i);
            f.bytes = s.substr(i, n);
            i += n;
        } else {
            FAIL("wire type " << f.wire);
        }
        out.push_back(f);
    }
    return out;
}
std::vector<Field> all(std::string_view s, unsigned number) {
    std::vector<Field> out;
    for (auto& f : fields(s))
        if (f.number == number) out.push_back(f);
    return out;
}
Field one(std::string_view s, unsigned number) {
    auto v = all(s, number);
    REQUIRE(v.size() == 1);
    return v[0];
}
// KeyValue list -> key: AnyValue bytes
std::map<std::string, std::string_view> kvs(std::string_view msg, unsigned number) {
    std::map<std::string, std::string_view> out;
    for (auto& kv : all(msg, number)) out[std::string(one(kv.bytes, 1).bytes)] = one(kv.bytes, 2).bytes;
    return out;
}

// ---- an HTTP endpoint in this process --------------------------------------
// Answers each request with the next scripted answer (the last one repeats),
// and keeps every request's body.
struct Answer {
    int status = 200;
    std::string body;
    std::string content_type = "application/json";
    std::string retry_after;
    bool close = false;
};
class FakeCollector {
public:
    explicit FakeCollector(std::vector<Answer> script) : script_(std::move(script)) {
        namespace asio = boost::asio;
        acceptor_.open(asio::ip::tcp::v4());
        acceptor_.set_option(asio::socket_base::reuse_address(true));
        acceptor_.bind({asio::ip::make_address("127.0.0.1"), 0});
        acceptor_.listen();
        port_ = acceptor_.local_endpoint().port();
        thread_ = std::thread([this] { serve(); });
    }
    ~FakeCollector() {
        stop_ = true;
        // A blocked accept() is not woken by a close from this thread: a
        // connection wakes it, and the loop sees stop_.
        boost::asio::io_context io;
        boost::asio::ip::tcp::socket wake(io);
        boost::system::error_code ec;
        wake.connect({boost::asio::ip::make_address("127.0.0.1"), port_}, ec);
        thread_.join();
    }
    std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1/logs"; }
    std::vector<std::string> bodies() {
        std::lock_guard lk(mu_);
        return bodies_;
    }
    std::vector<std::map<std::string, std::string>> headers() {
        std::lock_guard lk(mu_);
        return headers_;
    }
    size_t requests() {
        std::lock_guard lk(mu_);
        return bodies_.size();
    }

private:
    void serve() {
        namespace beast = boost::beast;
        namespace http = beast::http;
        while (!stop_) {
            boost::asio::ip::tcp::socket sock(io_);
            boost::system::error_code ec;
            acceptor_.accept(sock, ec);
            if (ec || stop_) return;
            beast::flat_buffer buf;
            for (;;) {
                http::request<http::string_body> req;
                http::read(sock, buf, req, ec);
                if (ec) break;
                Answer a;
                {
                    std::lock_guard lk(mu_);
                    bodies_.push_back(req.body());
                    std::map<std::string, std::string> h;
                    for (auto& f : req) h[std::string(f.name_string())] = std::string(f.value());
                    headers_.push_back(std::move(h));
                    a = script_[std::min(bodies_.size() - 1, script_.size() - 1)];
                }
                http::response<http::string_body> res(http::status(a.status), 11);
                res.set(http::field::content_type, a.content_type);
                if (!a.retry_after.empty()) res.set(http::field::retry_after, a.retry_after);
                res.keep_alive(!a.close);
                res.body() = a.body;
                res.prepare_payload();
                http::write(sock, res, ec);
                if (ec || a.close) break;
            }
        }
    }
    boost::asio::io_context io_;
    boost::asio::ip::tcp::acceptor acceptor_{io_};
    uint16_t port_ = 0;
    std::vector<Answer> script_;
    std::mutex mu_;
    std::vector<std::string> bodies_;
    std::vector<std::map<std::string, std::string>> headers_;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

// A port nothing listens on: bound, never listening.
struct DeadPort {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    uint16_t port = 0;
    DeadPort() {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        socklen_t n = sizeof a;
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
        port = ntohs(a.sin_port);
    }
    ~DeadPort() { ::close(fd); }
};

OtlpOptions fast_options(const std::string& url) {
    OtlpOptions o;
    auto ep = parse_endpoint(url);
    REQUIRE(ep);
    o.endpoint = *ep;
    o.batch_linger = 5ms;
    o.initial_backoff = 5ms;
    o.max_backoff = 20ms;
    o.timeout = 2000ms;
    o.shutdown_timeout = 2000ms;
    return o;
}

// The seqs of the log records in a protobuf body.
std::vector<int64_t> seqs_of(std::string_view body) {
    std::vector<int64_t> out;
    auto rl = one(body, 1).bytes;
    for (auto& sl : all(rl, 2))
        for (auto& lr : all(sl.bytes, 2)) {
            auto attrs = kvs(lr.bytes, 6);
            if (attrs.contains("bulwark.seq")) out.push_back(int64_t(one(attrs["bulwark.seq"], 3).value));
        }
    return out;
}

void publish(audit::EventBus& bus, std::vector<AuditRecord> batch) { bus.on_committed(batch); }

std::vector<AuditRecord> decisions(uint64_t first_seq, size_t n) {
    std::vector<AuditRecord> v;
    for (size_t i = 0; i < n; ++i) {
        auto r = file_denial();
        r.seq = first_seq + i;
        v.push_back(r);
    }
    return v;
}

}  // namespace

TEST_CASE("OCSF classes: file, network, process and the base event", "[telemetry][ocsf]") {
    auto c = classify(file_denial(), json());
    CHECK(c.class_uid == 1001);
    CHECK(c.category_uid == 1);
    CHECK(c.activity_id == 14);
    CHECK(c.activity_name == "Open");
    CHECK(c.type_uid() == 100114);
    CHECK(c.severity_id == 3);
    CHECK(c.status_id == 2);
    CHECK(c.action_id == 2);
    CHECK(c.disposition_id == 2);

    auto net = classify(connect_record("10.1.2.3", 443, BW_DECISION_ALLOW), json());
    CHECK(net.class_uid == 4001);
    CHECK(net.category_uid == 4);
    CHECK(net.activity_id == 1);
    CHECK(net.type_uid() == 400101);
    CHECK(net.status_id == 1);
    CHECK(net.action == "Allowed");
    CHECK(net.severity_id == 1);

    AuditRecord exec = file_denial();
    exec.op = BW_OP_EXEC;
    exec.decision = BW_DECISION_AUDIT;
    auto p = classify(exec, json());
    CHECK(p.class_uid == 1007);
    CHECK(p.activity_id == 1);
    CHECK(p.type_uid() == 100701);
    CHECK(p.disposition == "Detected");  // audit mode: would be denied, allowed
    CHECK(p.severity_id == 2);

    auto start = audit::run_start_record(3, 7, "cat", 2, json{{"argv", {"cat"}}});
    auto s = classify(start, json{{"argv", {"cat"}}});
    CHECK(s.class_uid == 1007);
    CHECK(s.activity_id == 1);
    CHECK_FALSE(s.has_action);
    auto exit_ok = audit::run_exit_record(3, 7, "cat", "exit", 0);
    CHECK(classify(exit_ok, json::parse(exit_ok.detail)).activity_id == 2);
    CHECK(classify(exit_ok, json::parse(exit_ok.detail)).severity_id == 1);
    auto oom = audit::run_exit_record(3, 7, "cat", "oom", 137);
    CHECK(classify(oom, json::parse(oom.detail)).severity_id == 2);

    auto gap = audit::gap_record("ringbuf", 12, 99);
    auto g = classify(gap, json::parse(gap.detail));
    CHECK(g.class_uid == 0);
    CHECK(g.type_uid() == 99);
    CHECK(g.severity_id == 4);

    AuditRecord sc = file_denial();
    sc.op = BW_OP_SYSCALL;
    CHECK(classify(sc, json()).class_uid == 0);
    AuditRecord bind = connect_record("127.0.0.1", 8080, BW_DECISION_DENY);
    bind.op = BW_OP_BIND;
    CHECK(classify(bind, json()).activity_id == 99);
    CHECK(classify(bind, json()).activity_name == "Bind");
}

TEST_CASE("a decision becomes a log record with its rule, layer, object and trace", "[telemetry][log]") {
    RunInfo run = run_info_from_detail(json{{"traceparent", kTraceparent},
                                            {"container",
                                             {{"id", "c0ffee"},
                                              {"pod_name", "agent-7"},
                                              {"pod_namespace", "agents"},
                                              {"pod_uid", "9d3c-11"}}}});
    REQUIRE(run.trace);
    auto r = file_denial();
    auto lr = to_log_record(r, &run, 1'700'000'001'000'000'000);
    CHECK(lr.time_ns == r.ts_ns);
    CHECK(lr.observed_ns == 1'700'000'001'000'000'000);
    CHECK(lr.event_name == "bulwark.decision");
    CHECK(lr.severity == Severity::Warn);
    CHECK(lr.body == "deny file_open /etc/shadow (landlock, rules/cat.yaml:12, EACCES)");
    REQUIRE(lr.has_trace);
    CHECK(to_hex(lr.trace_id.data(), 16) == "4bf92f3577b34da6a3ce929d0e0e4736");
    CHECK(to_hex(lr.span_id.data(), 8) == "00f067aa0ba902b7");
    CHECK(lr.flags == 1);

    CHECK(num(lr, "ocsf.class_uid") == 1001);
    CHECK(num(lr, "ocsf.category_uid") == 1);
    CHECK(num(lr, "ocsf.activity_id") == 14);
    CHECK(num(lr, "ocsf.type_uid") == 100114);
    CHECK(str(lr, "ocsf.type_name") == "File System Activity: Open");
    CHECK(num(lr, "ocsf.severity_id") == 3);
    CHECK(num(lr, "ocsf.status_id") == 2);
    CHECK(str(lr, "ocsf.status_code") == "EACCES");
    CHECK(num(lr, "ocsf.action_id") == 2);
    CHECK(num(lr, "ocsf.disposition_id") == 2);
    CHECK(str(lr, "ocsf.file.path") == "/etc/shadow");
    CHECK(str(lr, "ocsf.file.name") == "shadow");
    CHECK(num(lr, "ocsf.actor.process.pid") == 4242);
    CHECK(str(lr, "ocsf.actor.process.name") == "cat");
    CHECK(str(lr, "ocsf.metadata.version") == "1.1.0");

    CHECK(num(lr, "bulwark.seq") == 41);
    CHECK(num(lr, "bulwark.task_id") == 3);
    CHECK(num(lr, "bulwark.run_id") == 7);
    CHECK(str(lr, "bulwark.tool") == "cat");
    CHECK(num(lr, "bulwark.policy_version") == 2);
    CHECK(str(lr, "bulwark.decision") == "deny");
    CHECK(str(lr, "bulwark.layer") == "landlock");
    CHECK(str(lr, "bulwark.op") == "file_open");
    CHECK(str(lr, "bulwark.object") == "/etc/shadow");
    CHECK(num(lr, "bulwark.errno") == EACCES);
    CHECK(num(lr, "bulwark.rule.id") == 4);
    CHECK(str(lr, "bulwark.rule.file") == "rules/cat.yaml");
    CHECK(num(lr, "bulwark.rule.line") == 12);
    CHECK(str(lr, "bulwark.rule.text") == "deny: [/etc/shadow]");

    CHECK(str(lr, "container.id") == "c0ffee");
    CHECK(str(lr, "k8s.pod.name") == "agent-7");
    CHECK(str(lr, "k8s.namespace.name") == "agents");
    CHECK(str(lr, "k8s.pod.uid") == "9d3c-11");

    SECTION("without a run: no trace, no container, the policy's default") {
        auto d = file_denial();
        d.rule_id = BW_NO_RULE;
        d.rule_file.clear();
        auto plain = to_log_record(d, nullptr, 1);
        CHECK_FALSE(plain.has_trace);
        CHECK(plain.find("container.id") == nullptr);
        CHECK(plain.find("bulwark.rule.id") == nullptr);
        REQUIRE(plain.find("bulwark.rule.default"));
        CHECK(plain.find("bulwark.rule.default")->b);
        CHECK(plain.body == "deny file_open /etc/shadow (landlock, the policy's default, EACCES)");
    }
}

TEST_CASE("a container's decision names its container and pod from its own detail", "[telemetry][log]") {
    // as decision_from_event writes a container run's decision (bulwark-oci)
    auto r = file_denial();
    r.task_id = 0;
    r.detail = json{{"rights", 1},
                    {"container",
                     {{"id", "4f1c9e"},
                      {"pod_name", "agent-0"},
                      {"pod_namespace", "agents"},
                      {"pod_uid", "7d1e-22"},
                      {"container_name", "tool"}}}}
                   .dump();
    auto lr = to_log_record(r, nullptr, 1);
    CHECK(str(lr, "container.id") == "4f1c9e");
    CHECK(str(lr, "k8s.pod.name") == "agent-0");
    CHECK(str(lr, "k8s.namespace.name") == "agents");
    CHECK(str(lr, "k8s.pod.uid") == "7d1e-22");
    CHECK(str(lr, "k8s.container.name") == "tool");
    CHECK(lr.find("bulwark.task_id") == nullptr);  // a container's run has no task
    CHECK(num(lr, "bulwark.run_id") == 7);
}

TEST_CASE("network objects: the endpoint and protocol OCSF names", "[telemetry][log]") {
    const auto rec = connect_record("10.1.2.3", 443, BW_DECISION_DENY);  // outlives its log record
    auto lr = to_log_record(rec, nullptr, 1);
    CHECK(str(lr, "bulwark.object") == "tcp 10.1.2.3:443");
    CHECK(str(lr, "ocsf.dst_endpoint.ip") == "10.1.2.3");
    CHECK(num(lr, "ocsf.dst_endpoint.port") == 443);
    CHECK(str(lr, "ocsf.connection_info.protocol_name") == "tcp");
    CHECK(num(lr, "ocsf.activity_id") == 1);
    CHECK(str(lr, "ocsf.status_code") == "EPERM");

    // IPv6, as render_object writes it
    bw_event ev{};
    ev.obj_kind = BW_OBJ_NET;
    ev.obj.net.type = SOCK_DGRAM;
    ev.obj.net.family = AF_INET6;
    ev.obj.net.port = 53;
    REQUIRE(inet_pton(AF_INET6, "2001:db8::1", ev.obj.net.addr) == 1);
    auto r6 = connect_record("127.0.0.1", 1, BW_DECISION_ALLOW);
    r6.op = BW_OP_SENDMSG;
    r6.object = audit::render_object(ev);
    auto l6 = to_log_record(r6, nullptr, 1);
    CHECK(str(l6, "ocsf.dst_endpoint.ip") == "2001:db8::1");
    CHECK(num(l6, "ocsf.dst_endpoint.port") == 53);
    CHECK(str(l6, "ocsf.connection_info.protocol_name") == "udp");
    CHECK(num(l6, "ocsf.activity_id") == 6);

    // a bind names the tool's own address
    auto b = connect_record("127.0.0.1", 8080, BW_DECISION_DENY);
    b.op = BW_OP_BIND;
    auto lb = to_log_record(b, nullptr, 1);
    CHECK(str(lb, "ocsf.src_endpoint.ip") == "127.0.0.1");
    CHECK(num(lb, "ocsf.src_endpoint.port") == 8080);
    CHECK(lb.find("ocsf.dst_endpoint.ip") == nullptr);

    // unix sockets
    bw_event u{};
    u.obj_kind = BW_OBJ_UNIX;
    u.obj.unx.type = SOCK_STREAM;
    u.obj.unx.kind = BW_UNIX_PATH;
    const char* path = "/run/docker.sock";
    std::memcpy(u.obj.unx.name, path, std::strlen(path));
    u.obj.unx.len = uint16_t(std::strlen(path));
    auto ru = connect_record("127.0.0.1", 1, BW_DECISION_DENY);
    ru.layer = BW_LAYER_SOCK_UNIX;
    ru.object = audit::render_object(u);
    auto lu = to_log_record(ru, nullptr, 1);
    CHECK(str(lu, "ocsf.dst_endpoint.name") == "/run/docker.sock");
    CHECK(str(lu, "ocsf.connection_info.protocol_name") == "stream");
    CHECK(num(lu, "ocsf.class_uid") == 4001);
}

TEST_CASE("run start and exit, gaps and epochs as log records", "[telemetry][log]") {
    json d{{"argv", {"sh", "-c", "ls"}}, {"traceparent", kTraceparent}, {"epoch", 1}};
    auto start = audit::run_start_record(3, 7, "sh", 2, d);
    start.seq = 10;
    RunInfo run = run_info_from_detail(d);
    auto ls = to_log_record(start, &run, 1);
    CHECK(ls.event_name == "bulwark.run_start");
    CHECK(ls.body == "run_start sh (task 3, run 7): sh -c ls");
    CHECK(num(ls, "ocsf.class_uid") == 1007);
    CHECK(num(ls, "ocsf.activity_id") == 1);
    CHECK(str(ls, "ocsf.process.cmd_line") == "sh -c ls");
    CHECK(str(ls, "ocsf.process.name") == "sh");
    CHECK(ls.has_trace);
    CHECK(json::parse(str(ls, "bulwark.detail"))["traceparent"] == kTraceparent);

    auto exit = audit::run_exit_record(3, 7, "sh", "signal", 9);
    auto le = to_log_record(exit, &run, 1);
    CHECK(le.event_name == "bulwark.run_exit");
    CHECK(num(le, "ocsf.activity_id") == 2);
    CHECK(num(le, "ocsf.exit_code") == 9);
    CHECK(str(le, "bulwark.exit.reason") == "signal");
    CHECK(le.has_trace);

    auto gap = audit::gap_record("ringbuf", 12, 99);
    auto lg = to_log_record(gap, nullptr, 1);
    CHECK(lg.event_name == "bulwark.gap");
    CHECK(lg.severity == Severity::Error);
    CHECK(num(lg, "bulwark.gap.count") == 12);
    CHECK(str(lg, "bulwark.gap.source") == "ringbuf");

    auto ep = audit::policy_epoch_record("sh", 4, "grant", json{{"task_id", 3}});
    auto lp = to_log_record(ep, nullptr, 1);
    CHECK(lp.event_name == "bulwark.policy_epoch");
    CHECK(str(lp, "bulwark.epoch.change") == "grant");
    CHECK(num(lp, "ocsf.class_uid") == 0);
}

TEST_CASE("text that is not UTF-8 is exported with U+FFFD in place of each bad byte", "[telemetry][log]") {
    CHECK_FALSE(sanitize_utf8("plain /tmp/ä €"));
    CHECK(sanitize_utf8("/tmp/\xff\x41") == "/tmp/\xef\xbf\xbd" "A");
    CHECK(sanitize_utf8("\xc0\xaf") == "\xef\xbf\xbd\xef\xbf\xbd");          // overlong '/'
    CHECK(sanitize_utf8("\xed\xa0\x80") == "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");  // a surrogate
    CHECK(sanitize_utf8("\xe2\x82") == "\xef\xbf\xbd\xef\xbf\xbd");          // truncated
    auto r = file_denial();
    r.object = "/work/\xfe\xff.txt";
    auto lr = to_log_record(r, nullptr, 1);
    CHECK(str(lr, "bulwark.object") == "/work/\xef\xbf\xbd\xef\xbf\xbd.txt");
    CHECK(str(lr, "ocsf.file.name") == "\xef\xbf\xbd\xef\xbf\xbd.txt");
    CHECK_FALSE(sanitize_utf8(lr.body));
    std::string body;
    encode_logs_request(OtlpEncoding::Json, OtlpResource{}, std::span(&lr, 1), body);
    CHECK_FALSE(json::parse(body, nullptr, false).is_discarded());
}

TEST_CASE("the protobuf body is an ExportLogsServiceRequest", "[telemetry][encode]") {
    RunInfo run = run_info_from_detail(json{{"traceparent", kTraceparent}});
    auto r1 = file_denial();
    auto r2 = connect_record("10.1.2.3", 443, BW_DECISION_ALLOW);
    std::vector<LogRecord> logs{to_log_record(r1, &run, 1'700'000'001'000'000'000), to_log_record(r2, nullptr, 5)};
    OtlpResource res;
    res.attributes = {{"service.name", "bulwark-agentd"}, {"host.name", "node-1"}};
    res.scope_version = "0.1.0";
    std::string body;
    encode_logs_request(OtlpEncoding::Protobuf, res, logs, body);

    auto rl = one(body, 1).bytes;  // resource_logs
    auto resource = one(rl, 1).bytes;
    auto rattrs = kvs(resource, 1);
    CHECK(one(rattrs["service.name"], 1).bytes == "bulwark-agentd");
    CHECK(one(rattrs["host.name"], 1).bytes == "node-1");
    auto sl = one(rl, 2).bytes;  // scope_logs
    auto scope = one(sl, 1).bytes;
    CHECK(one(scope, 1).bytes == "bulwark.audit");
    CHECK(one(scope, 2).bytes == "0.1.0");
    auto lrs = all(sl, 2);
    REQUIRE(lrs.size() == 2);

    auto lr = lrs[0].bytes;
    CHECK(one(lr, 1).wire == 1);
    CHECK(one(lr, 1).value == uint64_t(r1.ts_ns));
    CHECK(one(lr, 2).value == 13);  // SEVERITY_NUMBER_WARN
    CHECK(one(lr, 3).bytes == "WARN");
    CHECK(one(one(lr, 5).bytes, 1).bytes == logs[0].body);
    CHECK(one(lr, 8).wire == 5);
    CHECK(one(lr, 8).value == 1);
    CHECK(one(lr, 9).bytes == std::string_view(reinterpret_cast<const char*>(run.trace->trace_id.data()), 16));
    CHECK(one(lr, 10).bytes == std::string_view(reinterpret_cast<const char*>(run.trace->span_id.data()), 8));
    CHECK(one(lr, 11).value == 1'700'000'001'000'000'000ull);
    CHECK(one(lr, 12).bytes == "bulwark.decision");
    auto attrs = kvs(lr, 6);
    CHECK(attrs.size() == logs[0].attributes.size());
    CHECK(one(attrs["ocsf.class_uid"], 3).value == 1001);
    CHECK(one(attrs["bulwark.rule.file"], 1).bytes == "rules/cat.yaml");

    auto lr2 = lrs[1].bytes;
    CHECK(all(lr2, 9).empty());   // no trace id without a run
    CHECK(all(lr2, 8).empty());   // nor flags
    CHECK(one(kvs(lr2, 6)["bulwark.rule.default"], 2).value == 1);
    CHECK(seqs_of(body) == std::vector<int64_t>{41, 50});
}

TEST_CASE("the JSON body follows the OTLP JSON mapping", "[telemetry][encode]") {
    RunInfo run = run_info_from_detail(json{{"traceparent", kTraceparent}});
    auto r = file_denial();
    r.rule_text = "deny: [\"/etc/shadow\"]\n\ttab";
    std::vector<LogRecord> logs{to_log_record(r, &run, 2)};
    OtlpResource res;
    res.attributes = {{"service.name", "bulwark-agentd"}};
    std::string body;
    encode_logs_request(OtlpEncoding::Json, res, logs, body);
    auto j = json::parse(body);
    CHECK(j["resourceLogs"][0]["resource"]["attributes"][0] ==
          json{{"key", "service.name"}, {"value", {{"stringValue", "bulwark-agentd"}}}});
    auto& sl = j["resourceLogs"][0]["scopeLogs"][0];
    CHECK(sl["scope"]["name"] == "bulwark.audit");
    auto& lr = sl["logRecords"][0];
    CHECK(lr["timeUnixNano"] == std::to_string(r.ts_ns));  // 64-bit integers as strings
    CHECK(lr["observedTimeUnixNano"] == "2");
    CHECK(lr["severityNumber"] == 13);                       // enums as numbers
    CHECK(lr["severityText"] == "WARN");
    CHECK(lr["traceId"] == "4bf92f3577b34da6a3ce929d0e0e4736");  // ids as hex, not base64
    CHECK(lr["spanId"] == "00f067aa0ba902b7");
    CHECK(lr["flags"] == 1);
    CHECK(lr["eventName"] == "bulwark.decision");
    CHECK(lr["body"]["stringValue"] == logs[0].body);
    std::map<std::string, json> attrs;
    for (auto& a : lr["attributes"]) attrs[a["key"]] = a["value"];
    CHECK(attrs["ocsf.class_uid"] == json{{"intValue", "1001"}});
    CHECK(attrs["bulwark.rule.text"] == json{{"stringValue", "deny: [\"/etc/shadow\"]\n\ttab"}});
    CHECK(attrs.size() == logs[0].attributes.size());
}

TEST_CASE("an answer's partial success is read in both encodings", "[telemetry][encode]") {
    auto j = parse_export_response("application/json",
                                   R"({"partialSuccess":{"rejectedLogRecords":"3","errorMessage":"too old"}})");
    REQUIRE(j);
    CHECK(j->rejected == 3);
    CHECK(j->message == "too old");
    CHECK_FALSE(parse_export_response("application/json", "{}"));
    CHECK_FALSE(parse_export_response("application/json", ""));
    // ExportLogsServiceResponse { partial_success (1) { rejected_log_records (1): 2, error_message (2): "x" } }
    std::string pb = std::string("\x0a\x05\x08\x02\x12\x01x", 7);
    auto p = parse_export_response("application/x-protobuf", pb);
    REQUIRE(p);
    CHECK(p->rejected == 2);
    CHECK(p->message == "x");
    CHECK_FALSE(parse_export_response("application/x-protobuf", std::string("\x0a\x09\x08", 3)));  // truncated
}

TEST_CASE("the endpoint URL and Retry-After", "[telemetry][http]") {
    auto e = parse_endpoint("http://collector.local:4318/v1/logs");
    REQUIRE(e);
    CHECK(e->host == "collector.local");
    CHECK(e->port == 4318);
    CHECK(e->target == "/v1/logs");
    auto d = parse_endpoint("http://[::1]:4318");
    REQUIRE(d);
    CHECK(d->host == "::1");
    CHECK(d->target == "/v1/logs");
    CHECK(parse_endpoint("http://10.0.0.1")->port == 80);
    CHECK(parse_endpoint("https://c:4318/v1/logs").error() ==
          "'https://c:4318/v1/logs': https is not supported; export to a collector over http://");
    CHECK_FALSE(parse_endpoint("collector:4318"));
    CHECK_FALSE(parse_endpoint("http://c:0/v1/logs"));
    CHECK_FALSE(parse_endpoint("http://c:99999/v1/logs"));
    CHECK_FALSE(parse_endpoint("http://user:pw@c:4318/v1/logs"));
    CHECK_FALSE(parse_endpoint("http:///v1/logs"));
    CHECK_FALSE(parse_endpoint("http://c:4318/v1/ logs"));

    auto now = std::chrono::system_clock::from_time_t(784111777);  // Sun, 06 Nov 1994 08:49:37 GMT
    CHECK(parse_retry_after("7", now) == 7s);
    CHECK(parse_retry_after(" 0 ", now) == 0s);
    CHECK(parse_retry_after("Sun, 06 Nov 1994 08:50:07 GMT", now) == 30s);
    CHECK(parse_retry_after("Sun, 06 Nov 1994 08:40:00 GMT", now) == 0s);  // past: at once
    CHECK_FALSE(parse_retry_after("soon", now));
    CHECK_FALSE(parse_retry_after("-3", now));
}

TEST_CASE("the event bus gives a record subscriber the records themselves", "[telemetry][bus]") {
    Metrics m;
    audit::EventBus bus(&m);
    auto sub = bus.subscribe({}, 2, audit::Payload::Record);
    auto js = bus.subscribe({}, 8);
    publish(bus, decisions(1, 3));
    auto got = sub->drain(10);
    REQUIRE(got.size() == 3);
    CHECK(got[0].record->seq == 1);
    CHECK(got[0].json == nullptr);
    CHECK(got[1].record->object == "/etc/shadow");
    CHECK(got[2].type == audit::BusMessage::Type::Gap);  // its bound was 2
    CHECK(got[2].dropped == 1);
    auto jg = js->drain(10);
    REQUIRE(jg.size() == 3);
    CHECK(jg[0].record == nullptr);
    CHECK(json::parse(*jg[0].json)["seq"] == 1);
}

TEST_CASE("the exporter sends every record once, with the resource and the trace of its run", "[telemetry][exporter]") {
    FakeCollector col({Answer{200, "{}"}});
    Metrics m;
    audit::EventBus bus(&m);
    auto o = fast_options(col.url());
    o.batch_records = 4;
    o.headers = {{"authorization", "Bearer t0ken"}};
    {
        OtlpExporter ex(o, bus, nullptr, &m);
        json d{{"argv", {"cat"}}, {"traceparent", kTraceparent}};
        auto start = audit::run_start_record(3, 7, "cat", 2, d);
        start.seq = 1;
        publish(bus, {start});
        publish(bus, decisions(2, 9));
        REQUIRE(ex.flush(5s));
        CHECK(m.otlp_records_exported == 10);
        CHECK(m.otlp_retries == 0);
        CHECK(ex.status()["state"] == "ok");
        CHECK(ex.status()["records_exported"] == 10);
    }
    std::vector<int64_t> seqs;
    for (auto& b : col.bodies()) {
        auto s = seqs_of(b);
        CHECK(s.size() <= 4);
        seqs.insert(seqs.end(), s.begin(), s.end());
        // every record of run 7 carries its trace id
        for (auto& lr : all(one(one(b, 1).bytes, 2).bytes, 2))
            CHECK(to_hex(reinterpret_cast<const uint8_t*>(one(lr.bytes, 9).bytes.data()), 16) ==
                  "4bf92f3577b34da6a3ce929d0e0e4736");
    }
    CHECK(seqs == std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
    auto h = col.headers().at(0);
    CHECK(h["Content-Type"] == "application/x-protobuf");
    CHECK(h["authorization"] == "Bearer t0ken");
    CHECK(m.render_prometheus().find("bulwark_otlp_records_exported_total 10\n") != std::string::npos);
}

TEST_CASE("503 twice, then 200: the batch is sent again and arrives once", "[telemetry][exporter]") {
    FakeCollector col({Answer{503, "busy", "text/plain", "0"}, Answer{503, "busy", "text/plain"}, Answer{200, "{}"}});
    Metrics m;
    audit::EventBus bus(&m);
    auto o = fast_options(col.url());
    o.encoding = OtlpEncoding::Json;
    OtlpExporter ex(o, bus, nullptr, &m);
    publish(bus, decisions(1, 5));
    REQUIRE(ex.flush(5s));
    CHECK(m.otlp_requests == 3);
    CHECK(m.otlp_retries == 2);
    CHECK(m.otlp_records_exported == 5);
    for (int i = 0; i < kOtlpDropReasons; ++i) CHECK(m.otlp_dropped[size_t(i)] == 0);
    auto bodies = col.bodies();
    REQUIRE(bodies.size() == 3);
    CHECK(bodies[0] == bodies[2]);  // the same batch, sent again
    CHECK(json::parse(bodies[2])["resourceLogs"][0]["scopeLogs"][0]["logRecords"].size() == 5);
    CHECK(col.headers()[0]["Content-Type"] == "application/json");
    CHECK(ex.status()["state"] == "ok");
    CHECK(ex.status()["last_error"] == "HTTP 503: busy");
}

TEST_CASE("Retry-After is waited out", "[telemetry][exporter]") {
    FakeCollector col({Answer{429, "", "text/plain", "1"}, Answer{200, "{}"}});
    Metrics m;
    audit::EventBus bus(&m);
    OtlpExporter ex(fast_options(col.url()), bus, nullptr, &m);
    auto t0 = std::chrono::steady_clock::now();
    publish(bus, decisions(1, 1));
    REQUIRE(ex.flush(5s));
    CHECK(std::chrono::steady_clock::now() - t0 >= 1s);  // not the 5 ms backoff
    CHECK(m.otlp_retries == 1);
    CHECK(m.otlp_records_exported == 1);
}

TEST_CASE("a refusal and a partial success drop what they name", "[telemetry][exporter]") {
    SECTION("400: dropped at once, not retried") {
        FakeCollector col({Answer{400, "bad", "text/plain"}});
        Metrics m;
        audit::EventBus bus(&m);
        OtlpExporter ex(fast_options(col.url()), bus, nullptr, &m);
        publish(bus, decisions(1, 3));
        REQUIRE(ex.flush(5s));
        CHECK(m.otlp_requests == 1);
        CHECK(m.otlp_dropped[size_t(OtlpDrop::Rejected)] == 3);
        CHECK(ex.status()["state"] == "failing");
        CHECK(ex.status()["dropped"]["rejected"] == 3);
    }
    SECTION("200 with rejected records") {
        FakeCollector col({Answer{200, R"({"partialSuccess":{"rejectedLogRecords":"2","errorMessage":"late"}})"}});
        Metrics m;
        audit::EventBus bus(&m);
        OtlpExporter ex(fast_options(col.url()), bus, nullptr, &m);
        publish(bus, decisions(1, 5));
        REQUIRE(ex.flush(5s));
        CHECK(m.otlp_records_exported == 3);
        CHECK(m.otlp_dropped[size_t(OtlpDrop::Rejected)] == 2);
    }
}

TEST_CASE("a dead endpoint: attempts, then the batch is dropped and counted", "[telemetry][exporter]") {
    DeadPort dead;
    Metrics m;
    audit::EventBus bus(&m);
    auto o = fast_options("http://127.0.0.1:" + std::to_string(dead.port) + "/v1/logs");
    o.max_attempts = 3;
    OtlpExporter ex(o, bus, nullptr, &m);
    publish(bus, decisions(1, 4));
    REQUIRE(ex.flush(5s));
    CHECK(m.otlp_requests == 3);
    CHECK(m.otlp_retries == 2);
    CHECK(m.otlp_dropped[size_t(OtlpDrop::ExportFailed)] == 4);
    auto st = ex.status();
    CHECK(st["state"] == "failing");
    CHECK(st["last_error"].get<std::string>().find("connect") != std::string::npos);
    CHECK(m.render_prometheus().find("bulwark_otlp_records_dropped_total{reason=\"export_failed\"} 4\n") !=
          std::string::npos);
}

TEST_CASE("a full queue: the bus drops for the exporter alone, and the gap is exported", "[telemetry][exporter]") {
    // The endpoint answers slowly enough that the queue fills while a batch is out.
    FakeCollector col({Answer{503, "", "text/plain", "1"}, Answer{200, "{}"}});
    Metrics m;
    audit::EventBus bus(&m);
    auto o = fast_options(col.url());
    o.queue_capacity = 16;
    o.batch_records = 8;
    OtlpExporter ex(o, bus, nullptr, &m);
    publish(bus, decisions(1, 8));
    for (int i = 0; i < 200 && col.requests() == 0; ++i) std::this_thread::sleep_for(5ms);
    publish(bus, decisions(9, 40));  // 16 fit, 24 dropped while the first batch waits out its Retry-After
    REQUIRE(ex.flush(10s));
    CHECK(m.otlp_dropped[size_t(OtlpDrop::QueueFull)] == 24);
    CHECK(m.otlp_records_exported == 24);
    bool gap = false;
    for (auto& b : col.bodies())
        for (auto& lr : all(one(one(b, 1).bytes, 2).bytes, 2))
            if (one(lr.bytes, 12).bytes == "bulwark.export_gap") {
                gap = true;
                CHECK(one(kvs(lr.bytes, 6)["bulwark.gap.count"], 3).value == 24);
            }
    CHECK(gap);
}

TEST_CASE("a run's trace context is looked up in the store when its start was not seen", "[telemetry][exporter]") {
    auto dir = std::filesystem::temp_directory_path() / ("otlp-unit-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    {
        audit::StoreOptions so;
        so.path = dir / "audit.db";
        so.min_free_bytes = 0;
        auto store = audit::AuditStore::open(so);
        REQUIRE(store);
        auto seq = (*store)->enqueue(audit::run_start_record(5, 77, "cat", 1, json{{"traceparent", kTraceparent}}));
        REQUIRE(seq);
        REQUIRE((*store)->wait_committed(*seq, 5s));

        FakeCollector col({Answer{200, "{}"}});
        audit::EventBus bus;
        OtlpExporter ex(fast_options(col.url()), bus, store->get(), nullptr);
        auto d = file_denial();
        d.task_id = 5;
        d.run_id = 77;
        publish(bus, {d});
        REQUIRE(ex.flush(5s));
        const auto bodies = col.bodies();  // the views below point into them
        auto lr = all(one(one(bodies.at(0), 1).bytes, 2).bytes, 2).at(0).bytes;
        CHECK(to_hex(reinterpret_cast<const uint8_t*>(one(lr, 9).bytes.data()), 16) ==
              "4bf92f3577b34da6a3ce929d0e0e4736");
        CHECK(ex.metrics().otlp_records_exported == 1);
    }
    std::filesystem::remove_all(dir);
}

TEST_CASE("stop exports what is queued, within the shutdown deadline", "[telemetry][exporter]") {
    SECTION("a live endpoint: everything goes out") {
        FakeCollector col({Answer{200, "{}"}});
        Metrics m;
        audit::EventBus bus(&m);
        auto o = fast_options(col.url());
        o.batch_linger = 10s;  // only the stop sends it
        OtlpExporter ex(o, bus, nullptr, &m);
        publish(bus, decisions(1, 3));
        ex.stop();
        CHECK(m.otlp_records_exported == 3);
    }
    SECTION("a dead endpoint: dropped as shutdown once the deadline passes") {
        FakeCollector col({Answer{503, "", "text/plain", "30"}});
        Metrics m;
        audit::EventBus bus(&m);
        auto o = fast_options(col.url());
        o.shutdown_timeout = 200ms;
        OtlpExporter ex(o, bus, nullptr, &m);
        publish(bus, decisions(1, 3));
        for (int i = 0; i < 200 && col.requests() == 0; ++i) std::this_thread::sleep_for(5ms);
        auto t0 = std::chrono::steady_clock::now();
        ex.stop();
        CHECK(std::chrono::steady_clock::now() - t0 < 5s);  // not the 30 s Retry-After
        CHECK(m.otlp_dropped[size_t(OtlpDrop::Shutdown)] == 3);
    }
}
