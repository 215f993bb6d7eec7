#include "api/http_server.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <deque>
#include <thread>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <spdlog/spdlog.h>

#include "audit/metrics.h"

namespace bulwark::http {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bh = boost::beast::http;
namespace ws = boost::beast::websocket;
using Proto = asio::generic::stream_protocol;
using Socket = Proto::socket;
using Acceptor = asio::basic_socket_acceptor<Proto>;
using error_code = boost::system::error_code;

std::optional<TokenHash> parse_token_hash(std::string_view hex) {
    if (hex.size() != 64) return std::nullopt;
    TokenHash h{};
    for (size_t i = 0; i < 32; ++i) {
        auto v = [](char c) -> int {
            if (c >= '0' && c <= '9') return c - '0';
            if (c >= 'a' && c <= 'f') return c - 'a' + 10;
            if (c >= 'A' && c <= 'F') return c - 'A' + 10;
            return -1;
        };
        int a = v(hex[2 * i]), b = v(hex[2 * i + 1]);
        if (a < 0 || b < 0) return std::nullopt;
        h[i] = uint8_t(a * 16 + b);
    }
    return h;
}

struct HttpServer::Impl {
    ServerConfig cfg;
    const Router& router;
    Metrics* metrics;
    asio::thread_pool workers;
    asio::thread_pool run_workers;
    std::vector<std::thread> threads;
    uint16_t bound_port = 0;
    bool unix_bound = false;  // we created the socket file: remove it at exit
    std::atomic<size_t> conns{0};
    // Declared last, destroyed first: sessions still queued in it are
    // destroyed while everything they refer to above is alive.
    asio::io_context ioc;
    std::optional<Acceptor> unix_acc, tcp_acc;

    Impl(ServerConfig c, const Router& r, Metrics* m)
        : cfg(std::move(c)), router(r), metrics(m), workers(size_t(std::max(1, cfg.worker_threads))),
          run_workers(size_t(std::max(1, cfg.run_threads))) {}
    ~Impl() {
        unix_acc.reset();
        tcp_acc.reset();
    }

    void count_status(int status) {
        if (metrics && status >= 100 && status < 600)
            metrics->http_responses[size_t(status / 100)].fetch_add(1, std::memory_order_relaxed);
    }
    void do_accept(Acceptor& acc, bool tcp);
    void on_accept(Socket s, bool tcp);
};

namespace {

class Session : public std::enable_shared_from_this<Session> {
public:
    Session(HttpServer::Impl& srv, Socket s, Peer peer, bool tcp)
        : srv_(srv), sock_(std::move(s)), timer_(sock_.get_executor()), ka_timer_(sock_.get_executor()),
          peer_(std::move(peer)), tcp_(tcp) {
        ++srv_.conns;
        if (srv_.metrics) srv_.metrics->http_connections.store(srv_.conns.load(), std::memory_order_relaxed);
    }
    ~Session() {
        --srv_.conns;
        if (srv_.metrics) srv_.metrics->http_connections.store(srv_.conns.load(), std::memory_order_relaxed);
    }
    void start() { read_request(); }

private:
    HttpServer::Impl& srv_;
    Socket sock_;
    asio::steady_timer timer_;
    asio::steady_timer ka_timer_;
    beast::flat_buffer buf_;
    std::optional<bh::request_parser<bh::string_body>> parser_;
    Peer peer_;
    bool tcp_;
    bool closed_ = false;
    // streaming (SSE / WebSocket)
    std::shared_ptr<StreamSource> stream_;
    std::unique_ptr<ws::stream<Socket>> ws_;
    std::deque<std::string> outq_;
    bool writing_ = false;
    std::array<char, 512> scratch_{};

    void arm(std::chrono::milliseconds d) {
        timer_.expires_after(d);
        timer_.async_wait([self = shared_from_this()](error_code ec) {
            if (ec) return;  // re-armed or cancelled
            if (self->srv_.metrics) self->srv_.metrics->http_timeouts.fetch_add(1, std::memory_order_relaxed);
            self->close();
        });
    }

    void close() {
        if (closed_) return;
        closed_ = true;
        error_code ec;
        timer_.cancel();
        ka_timer_.cancel();
        if (ws_) {
            beast::get_lowest_layer(*ws_).shutdown(Socket::shutdown_both, ec);
            beast::get_lowest_layer(*ws_).close(ec);
        } else {
            sock_.shutdown(Socket::shutdown_both, ec);
            sock_.close(ec);
        }
        stream_.reset();
    }

    void read_request() {
        parser_.emplace();
        parser_->header_limit(uint32_t(srv_.cfg.limits.header_limit));
        parser_->body_limit(srv_.cfg.limits.body_limit);
        // a unix peer that will be refused anyway gets little time to hold a slot
        arm(!tcp_ && !peer_allowed() ? std::min(srv_.cfg.read_timeout, std::chrono::milliseconds(2000))
                                     : srv_.cfg.read_timeout);
        bh::async_read_header(sock_, buf_, *parser_,
                              [self = shared_from_this()](error_code ec, size_t) { self->on_header(ec); });
    }

    static bool quiet_end(const error_code& ec) {
        return ec == bh::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
               ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor ||
               ec == asio::error::broken_pipe;
    }

    void on_header(error_code ec) {
        if (closed_) return;
        if (quiet_end(ec) && !(ec == bh::error::end_of_stream && buf_.size() > 0)) return close();
        if (ec) return fail(parse_error(ec));
        if (auto e = check_request_header(raw_header_of(parser_->get()), srv_.cfg.limits)) return fail(*e);
        if (parser_->is_done()) return on_request();
        bh::async_read(sock_, buf_, *parser_, [self = shared_from_this()](error_code ec, size_t) {
            if (self->closed_) return;
            if (ec && quiet_end(ec)) return self->close();
            if (ec) return self->fail(parse_error(ec));
            self->on_request();
        });
    }

    // An error answer ends the connection: what follows on it cannot be trusted.
    void fail(const HttpError& e) { respond(error_response(e.status, e.code, e.message), true, 11); }

    bool peer_allowed() const {
        for (auto u : srv_.cfg.allowed_uids)
            if (u == peer_.uid) return true;
        for (auto g : srv_.cfg.allowed_gids)
            if (g == peer_.gid) return true;
        return false;
    }

    // A browser cannot set Authorization on a WebSocket: it offers the token
    // as the subprotocol "bulwark.token.<token>" next to "bulwark.v1", and
    // the server answers with "bulwark.v1" (the token is never echoed).
    static constexpr std::string_view kTokenProtocol = "bulwark.token.";
    static constexpr std::string_view kWsProtocol = "bulwark.v1";
    static std::vector<std::string_view> ws_protocols(const bh::request<bh::string_body>& req) {
        std::vector<std::string_view> out;
        for (auto it = req.find(bh::field::sec_websocket_protocol); it != req.end() && it->name() == bh::field::sec_websocket_protocol; ++it) {
            std::string_view v(it->value().data(), it->value().size());
            while (!v.empty()) {
                auto comma = v.find(',');
                auto item = v.substr(0, comma);
                while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
                while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
                if (!item.empty()) out.push_back(item);
                if (comma == std::string_view::npos) break;
                v.remove_prefix(comma + 1);
            }
        }
        return out;
    }

    std::optional<ApiResponse> check_token(std::string_view token) const {
        auto h = sha256(token);
        int match = 0;
        for (const auto& t : srv_.cfg.token_sha256) match |= CRYPTO_memcmp(h.data(), t.data(), h.size()) == 0;
        if (match) return std::nullopt;
        auto r = error_response(401, "bad_token", "token not accepted");
        r.headers.emplace_back("WWW-Authenticate", "Bearer error=\"invalid_token\"");
        return r;
    }

    std::optional<ApiResponse> authorize(const bh::request<bh::string_body>& req, bool public_asset) {
        if (!tcp_) {
            if (peer_allowed()) return std::nullopt;
            return error_response(403, "forbidden_peer",
                                  "uid " + std::to_string(peer_.uid) + " gid " + std::to_string(peer_.gid) +
                                      " may not use this socket");
        }
        auto host = req.find(bh::field::host);
        if (host == req.end() ||
            !host_allowed(std::string_view(host->value().data(), host->value().size()), srv_.bound_port))
            return error_response(403, "forbidden_host", "Host must be localhost, 127.0.0.1 or [::1] on this port");
        if (auto o = req.find(bh::field::origin); o != req.end() &&
            !origin_allowed(std::string_view(o->value().data(), o->value().size()), srv_.bound_port))
            return error_response(403, "forbidden_origin", "cross-origin requests are refused");
        if (public_asset) return std::nullopt;
        auto auth = req.find(bh::field::authorization);
        if (auth == req.end() && ws::is_upgrade(req)) {
            for (auto p : ws_protocols(req))
                if (p.starts_with(kTokenProtocol)) return check_token(p.substr(kTokenProtocol.size()));
        }
        if (auth == req.end()) {
            auto r = error_response(401, "missing_token", "send Authorization: Bearer <token>");
            r.headers.emplace_back("WWW-Authenticate", "Bearer");
            return r;
        }
        std::string_view v(auth->value().data(), auth->value().size());
        if (!v.starts_with("Bearer ")) {
            auto r = error_response(401, "bad_token", "only Bearer tokens are accepted");
            r.headers.emplace_back("WWW-Authenticate", "Bearer");
            return r;
        }
        return check_token(v.substr(7));
    }

    void on_request() {
        auto& req = parser_->get();
        unsigned version = req.version();
        bool keep = req.keep_alive();
        ApiRequest ar;
        ar.method = std::string(req.method_string());
        std::string_view target(req.target().data(), req.target().size());
        auto qpos = target.find('?');
        auto path = percent_decode(target.substr(0, qpos), false);
        if (!path) {
            if (auto denied = authorize(req, false)) return respond(std::move(*denied), true, version);
            return respond(error_response(400, "bad_target", "malformed percent-encoding in path"), true, version);
        }
        ar.path = std::move(*path);
        if (qpos != std::string_view::npos) {
            auto q = parse_query(target.substr(qpos + 1));
            if (!q) {
                if (auto denied = authorize(req, false)) return respond(std::move(*denied), true, version);
                return respond(error_response(400, "bad_query", "malformed or repeated query parameter"), true, version);
            }
            ar.query = std::move(*q);
        }
        for (const auto& f : req) ar.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
        ar.body = std::move(req.body());
        ar.peer = peer_;

        ApiResponse err;
        const Router::Route* route = srv_.router.match(ar.method, ar.path, ar.params, err);
        // a refused caller gets its answer and the connection ends; an
        // unknown path is not told apart from a known one before the token
        if (auto denied = authorize(req, route && route->opts.public_asset))
            return respond(std::move(*denied), true, version);
        if (!route) return respond(std::move(err), !keep, version);

        if (route->opts.websocket) {
            if (!ws::is_upgrade(req))
                return respond(error_response(426, "upgrade_required", "this endpoint speaks WebSocket only"), !keep,
                               version);
            ApiResponse resp = run(*route, ar);
            if (!resp.stream) return respond(std::move(resp), !keep, version);
            return start_ws(parser_->release(), std::move(resp.stream));
        }
        if (route->opts.offload) {
            timer_.cancel();
            auto& pool = route->opts.long_running ? srv_.run_workers : srv_.workers;
            asio::post(pool, [self = shared_from_this(), route, ar = std::move(ar), keep, version]() mutable {
                auto resp = self->run(*route, ar);
                asio::post(self->sock_.get_executor(), [self, resp = std::move(resp), keep, version]() mutable {
                    if (!self->closed_) self->respond(std::move(resp), !keep, version);
                });
            });
            return;
        }
        ApiResponse resp = run(*route, ar);
        if (resp.stream) return start_sse(std::move(resp));
        respond(std::move(resp), !keep, version);
    }

    ApiResponse run(const Router::Route& r, const ApiRequest& ar) {
        try {
            return r.handler(ar);
        } catch (const std::exception& e) {
            spdlog::error("API handler {} {} threw: {}", ar.method, ar.path, e.what());
            return error_response(500, "internal", "internal error");
        }
    }

    void respond(ApiResponse resp, bool close_after, unsigned version) {
        srv_.count_status(resp.status);
        auto res = std::make_shared<bh::response<bh::string_body>>(bh::status(unsigned(resp.status)),
                                                                   version == 10 ? 10 : 11);
        res->set(bh::field::server, "bulwark-agentd");
        res->set(bh::field::content_type, resp.content_type);
        res->set(bh::field::cache_control, "no-store");
        res->set("X-Content-Type-Options", "nosniff");
        for (auto& [k, v] : resp.headers) res->set(k, v);
        res->body() = std::move(resp.body);
        res->keep_alive(!close_after);
        res->prepare_payload();
        arm(srv_.cfg.write_timeout);
        bh::async_write(sock_, *res, [self = shared_from_this(), res, close_after](error_code ec, size_t) {
            if (self->closed_) return;
            if (ec) return self->close();
            if (close_after) return self->linger_close();
            self->read_request();
        });
    }

    // Half-close, then read and discard what the client still sends (up to
    // a second) so our answer is not destroyed by a reset.
    void linger_close() {
        error_code ec;
        sock_.shutdown(Socket::shutdown_send, ec);
        arm(std::chrono::milliseconds(1000));
        drain_input();
    }
    void drain_input() {
        sock_.async_read_some(asio::buffer(scratch_), [self = shared_from_this()](error_code ec, size_t) {
            if (self->closed_) return;
            if (ec) return self->close();
            self->drain_input();
        });
    }

    // ---- streams -------------------------------------------------------
    std::function<void()> notifier() {
        std::weak_ptr<Session> w = shared_from_this();
        auto ex = sock_.get_executor();
        return [w, ex] {
            asio::post(ex, [w] {
                if (auto s = w.lock()) s->pump();
            });
        };
    }

    // SSE comment lines keep proxies and clients from timing out; WebSocket
    // streams use Beast's own keep-alive pings instead (stream_base::timeout).
    void keepalive() {
        ka_timer_.expires_after(srv_.cfg.stream_keepalive);
        ka_timer_.async_wait([self = shared_from_this()](error_code ec) {
            if (ec || self->closed_) return;
            self->outq_.push_back(":\n\n");
            self->flush();
            self->keepalive();
        });
    }

    void start_sse(ApiResponse resp) {
        srv_.count_status(200);
        timer_.cancel();
        stream_ = std::move(resp.stream);
        outq_.push_back(
            "HTTP/1.1 200 OK\r\nServer: bulwark-agentd\r\nContent-Type: text/event-stream\r\n"
            "Cache-Control: no-store\r\nX-Accel-Buffering: no\r\nConnection: close\r\n\r\n"
            "retry: 2000\n: subscribed\n\n");
        stream_->start(notifier());
        watch_sse_client();
        keepalive();
        pump();
    }

    // The client sends nothing on an SSE stream; a read completes on close.
    void watch_sse_client() {
        sock_.async_read_some(asio::buffer(scratch_), [self = shared_from_this()](error_code ec, size_t) {
            if (self->closed_) return;
            if (ec) return self->close();
            self->watch_sse_client();
        });
    }

    void start_ws(bh::request<bh::string_body> req, std::shared_ptr<StreamSource> stream) {
        timer_.cancel();
        stream_ = std::move(stream);
        ws_ = std::make_unique<ws::stream<Socket>>(std::move(sock_));
        ws_->set_option(ws::stream_base::timeout{srv_.cfg.write_timeout, srv_.cfg.stream_keepalive * 2, true});
        ws_->read_message_max(64 * 1024);
        // Echo one offered subprotocol (a browser drops the connection
        // otherwise): "bulwark.v1", never the token.
        std::string proto;
        for (auto p : ws_protocols(req))
            if (p == kWsProtocol) proto = std::string(p);
        ws_->set_option(ws::stream_base::decorator([proto](ws::response_type& r) {
            r.set(bh::field::server, "bulwark-agentd");
            if (!proto.empty()) r.set(bh::field::sec_websocket_protocol, proto);
        }));
        auto reqp = std::make_shared<bh::request<bh::string_body>>(std::move(req));
        ws_->async_accept(*reqp, [self = shared_from_this(), reqp](error_code ec) {
            if (ec) return self->close();
            self->srv_.count_status(101);
            self->stream_->start(self->notifier());
            self->ws_read();
            self->pump();
        });
    }

    void ws_read() {
        auto b = std::make_shared<beast::flat_buffer>();
        ws_->async_read(*b, [self = shared_from_this(), b](error_code ec, size_t) {
            if (self->closed_) return;
            if (ec) return self->close();
            self->ws_read();  // client messages are ignored
        });
    }

    void pump() {
        if (closed_ || !stream_) return;
        for (auto& m : stream_->poll(256)) {
            if (ws_) {
                outq_.push_back(std::move(m.data));
            } else {
                std::string f;
                if (!m.event.empty()) f += "event: " + m.event + "\n";
                f += "data: " + m.data + "\n\n";
                outq_.push_back(std::move(f));
            }
        }
        flush();
        // A finite stream (streamed exec) ends once its last message is out.
        if (!writing_ && outq_.empty() && stream_ && stream_->finished()) end_stream();
    }

    void end_stream() {
        if (!ws_) return close();
        writing_ = true;
        ws_->async_close(ws::close_code::normal, [self = shared_from_this()](error_code) { self->close(); });
    }

    void flush() {
        if (closed_ || writing_ || outq_.empty()) return;
        writing_ = true;
        arm(srv_.cfg.write_timeout);
        if (ws_) {
            auto msg = std::make_shared<std::string>(std::move(outq_.front()));
            outq_.pop_front();
            ws_->text(true);
            ws_->async_write(asio::buffer(*msg), [self = shared_from_this(), msg](error_code ec, size_t) {
                self->after_write(ec);
            });
        } else {
            auto data = std::make_shared<std::string>();
            for (auto& s : outq_) *data += s;
            outq_.clear();
            asio::async_write(sock_, asio::buffer(*data), [self = shared_from_this(), data](error_code ec, size_t) {
                self->after_write(ec);
            });
        }
    }

    void after_write(error_code ec) {
        writing_ = false;
        if (closed_) return;
        if (ec) return close();
        timer_.cancel();
        pump();
    }
};

Peer peer_of(Socket& s, bool tcp) {
    Peer p;
    if (!tcp) {
        p.transport = Peer::Transport::Unix;
        ucred cr{};
        socklen_t len = sizeof cr;
        if (getsockopt(s.native_handle(), SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0) {
            p.uid = cr.uid;
            p.gid = cr.gid;
            p.pid = cr.pid;
        }
    } else {
        p.transport = Peer::Transport::Tcp;
        error_code ec;
        auto ep = s.remote_endpoint(ec);
        if (!ec) {
            asio::ip::tcp::endpoint tep;
            std::memcpy(tep.data(), ep.data(), std::min<size_t>(ep.size(), sizeof(sockaddr_in6)));
            p.address = tep.address().to_string() + ":" + std::to_string(tep.port());
        }
    }
    return p;
}

}  // namespace

void HttpServer::Impl::do_accept(Acceptor& acc, bool tcp) {
    acc.async_accept(asio::make_strand(ioc), [this, &acc, tcp](error_code ec, Socket s) {
        if (ec == asio::error::operation_aborted || !acc.is_open()) return;
        if (!ec) {
            on_accept(std::move(s), tcp);
            return do_accept(acc, tcp);
        }
        // out of descriptors or similar: back off instead of spinning
        spdlog::warn("API accept failed: {}", ec.message());
        auto t = std::make_shared<asio::steady_timer>(ioc, std::chrono::milliseconds(50));
        t->async_wait([this, &acc, tcp, t](error_code) {
            if (acc.is_open()) do_accept(acc, tcp);
        });
    });
}

void HttpServer::Impl::on_accept(Socket s, bool tcp) {
    if (conns.load() >= cfg.max_connections) {
        if (metrics) metrics->http_connections_refused.fetch_add(1, std::memory_order_relaxed);
        error_code ec;
        s.close(ec);
        return;
    }
    auto peer = peer_of(s, tcp);
    std::make_shared<Session>(*this, std::move(s), std::move(peer), tcp)->start();
}

std::expected<std::unique_ptr<HttpServer>, std::string> HttpServer::start(ServerConfig cfg, const Router& router,
                                                                         Metrics* metrics) {
    std::unique_ptr<HttpServer> srv(new HttpServer());
    srv->impl_ = std::make_unique<Impl>(std::move(cfg), router, metrics);
    auto& I = *srv->impl_;
    error_code ec;
    if (I.cfg.unix_path) {
        const std::string& path = *I.cfg.unix_path;
        if (path.size() >= sizeof(sockaddr_un::sun_path)) return std::unexpected("unix socket path too long: " + path);
        struct stat st{};
        if (lstat(path.c_str(), &st) == 0) {
            if (!S_ISSOCK(st.st_mode)) return std::unexpected(path + " exists and is not a socket; not replacing it");
            // a live daemon answers; a stale socket refuses
            asio::local::stream_protocol::socket probe(I.ioc);
            probe.connect(asio::local::stream_protocol::endpoint(path), ec);
            if (!ec) return std::unexpected("another daemon is listening on " + path);
            ::unlink(path.c_str());
        }
        I.unix_acc.emplace(I.ioc);
        Proto::endpoint ep{asio::local::stream_protocol::endpoint(path)};
        I.unix_acc->open(ep.protocol(), ec);
        // the socket file is created with the umask: make it private first,
        // then widen it to unix_mode
        mode_t old = ::umask(0177);
        if (!ec) I.unix_acc->bind(ep, ec);
        ::umask(old);
        if (ec) return std::unexpected("bind(" + path + "): " + ec.message());
        I.unix_bound = true;
        if (I.cfg.unix_group && ::chown(path.c_str(), uid_t(-1), *I.cfg.unix_group) != 0)
            return std::unexpected("chown(" + path + "): " + std::strerror(errno));
        if (::chmod(path.c_str(), I.cfg.unix_mode) != 0)
            return std::unexpected("chmod(" + path + "): " + std::strerror(errno));
        I.unix_acc->listen(asio::socket_base::max_listen_connections, ec);
        if (ec) return std::unexpected("listen(" + path + "): " + ec.message());
    }
    if (I.cfg.tcp_host) {
        auto addr = asio::ip::make_address(*I.cfg.tcp_host, ec);
        if (ec || !addr.is_loopback())
            return std::unexpected("the TCP listener must use a loopback address (127.0.0.1 or ::1), not '" +
                                   *I.cfg.tcp_host + "'");
        if (I.cfg.token_sha256.empty())
            return std::unexpected("the TCP listener needs at least one token (api.tokens_sha256)");
        asio::ip::tcp::endpoint tep(addr, I.cfg.tcp_port);
        Proto::endpoint ep(tep);
        I.tcp_acc.emplace(I.ioc);
        I.tcp_acc->open(ep.protocol(), ec);
        if (!ec) I.tcp_acc->set_option(asio::socket_base::reuse_address(true), ec);
        if (!ec) I.tcp_acc->bind(ep, ec);
        if (!ec) I.tcp_acc->listen(asio::socket_base::max_listen_connections, ec);
        if (ec) return std::unexpected("listen on " + *I.cfg.tcp_host + ":" + std::to_string(I.cfg.tcp_port) + ": " +
                                       ec.message());
        auto local = I.tcp_acc->local_endpoint(ec);
        asio::ip::tcp::endpoint lt;
        std::memcpy(lt.data(), local.data(), std::min<size_t>(local.size(), sizeof(sockaddr_in6)));
        I.bound_port = lt.port();
    }
    if (!I.unix_acc && !I.tcp_acc) return std::unexpected("no listener configured");
    if (I.unix_acc) I.do_accept(*I.unix_acc, false);
    if (I.tcp_acc) I.do_accept(*I.tcp_acc, true);
    for (int i = 0; i < std::max(1, I.cfg.io_threads); ++i)
        I.threads.emplace_back([&I] { I.ioc.run(); });
    return srv;
}

HttpServer::~HttpServer() {
    if (!impl_) return;
    auto& I = *impl_;
    asio::post(I.ioc, [&I] {
        error_code ec;
        if (I.unix_acc) I.unix_acc->close(ec);
        if (I.tcp_acc) I.tcp_acc->close(ec);
    });
    I.ioc.stop();
    for (auto& t : I.threads) t.join();
    I.workers.join();
    I.run_workers.join();
    // never remove a socket this server did not create (e.g. a live daemon's)
    if (I.unix_bound) ::unlink(I.cfg.unix_path->c_str());
}

uint16_t HttpServer::tcp_port() const { return impl_->bound_port; }
size_t HttpServer::connections() const { return impl_->conns.load(); }

}  // namespace bulwark::http
