// `agentd mcp`: the Model Context Protocol server (mcp_server.h) on stdio,
// as a client of a running `agentd serve` over its unix socket. Messages are
// newline-delimited JSON-RPC 2.0 on stdin and stdout; nothing else is ever
// written to stdout (logs go to stderr). The session's task is closed when
// stdin ends or on SIGTERM, SIGINT or SIGHUP.
#include "cli/cmd_mcp.h"

#include <CLI/CLI.hpp>

#include <signal.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "mcp/agentd_client.h"
#include "cli/config.h"
#include "common/json_input.h"
#include "api/http_server.h"
#include "mcp/mcp_http.h"
#include "mcp/mcp_server.h"

namespace bulwark {
namespace {

struct McpArgs {
    std::string socket = "/run/bulwark/agentd.sock";
    std::string grant;
    std::vector<std::string> tools;
    std::string label = "mcp session";
    std::string http;                   // Streamable HTTP instead of stdio
    std::vector<std::string> token_sha256;
    uint64_t session_idle_ms = 30 * 60 * 1000;
};

std::expected<nlohmann::json, std::string> load_grant(const std::string& arg) {
    if (arg.empty()) return nlohmann::json(nullptr);
    std::string text = arg, name = "--grant";
    if (arg.front() == '@') {
        name = arg.substr(1);
        std::ifstream in(name);
        if (!in) return std::unexpected("--grant: cannot read " + name);
        std::stringstream ss;
        ss << in.rdbuf();
        text = ss.str();
    }
    try {
        return nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {  // parse_error, out_of_range (a number no double holds)
        return std::unexpected(name + ": not JSON: " + e.what());
    }
}

// Requests that may block for a whole tool run are served on their own
// thread, so pings and other calls are answered meanwhile.
bool runs_long(const nlohmann::json& msg) {
    return msg.is_object() && msg.contains("id") && msg.value("method", nlohmann::json()) == "tools/call";
}

// One message per line, at most kMaxLine bytes: a longer line is consumed
// to its end and reported, never buffered whole.
constexpr size_t kMaxLine = 16u << 20;
constexpr size_t kMaxInFlight = 32;

bool read_line(std::streambuf* in, std::string& line, bool& too_long) {
    line.clear();
    too_long = false;
    for (;;) {
        int c = in->sbumpc();
        if (c == std::char_traits<char>::eof()) return !line.empty() || too_long;
        if (c == '\n') return true;
        if (line.size() < kMaxLine)
            line.push_back(static_cast<char>(c));
        else
            too_long = true;
    }
}

nlohmann::json rpc_error(int code, const std::string& message) {
    return {{"jsonrpc", "2.0"}, {"id", nullptr}, {"error", {{"code", code}, {"message", message}}}};
}

// Streamable HTTP: sessions over the API's HTTP server until a signal.
int serve_http(const McpArgs& args, const AgentdClient& client, const nlohmann::json& grant, const sigset_t& stop) {
    auto listen = parse_listen(args.http);
    if (!listen) {
        std::cerr << "agentd mcp: --http: " << listen.error() << "\n";
        return 2;
    }
    http::ServerConfig cfg;
    cfg.tcp_host = listen->first;
    cfg.tcp_port = listen->second;
    for (const auto& h : args.token_sha256) {
        auto t = http::parse_token_hash(h);
        if (!t) {
            std::cerr << "agentd mcp: --token-sha256: not a SHA-256 hash (64 hex digits); `agentd token-hash` prints one\n";
            return 2;
        }
        cfg.token_sha256.push_back(*t);
    }
    if (cfg.token_sha256.empty()) {
        std::cerr << "agentd mcp: --http needs --token-sha256 (clients send Authorization: Bearer <token>)\n";
        return 2;
    }
    cfg.run_threads = 16;
    mcp::HttpSessions sessions([&] {
        return std::make_unique<mcp::Server>(
            [&client](std::string_view m, std::string_view t, const std::optional<nlohmann::json>& b) {
                return client.call(m, t, b);
            },
            mcp::Options{args.tools, grant, args.label});
    }, 64, std::chrono::milliseconds(args.session_idle_ms));
    http::Router router;
    sessions.register_routes(router);
    auto server = http::HttpServer::start(cfg, router, nullptr);
    if (!server) {
        std::cerr << "agentd mcp: " << server.error() << "\n";
        return 1;
    }
    std::cerr << "agentd mcp: streamable HTTP on http://" << args.http.substr(0, args.http.rfind(':')) << ":"
              << (*server)->tcp_port() << "/mcp" << std::endl;
    int sig = 0;
    sigwait(&stop, &sig);
    server->reset();  // no request in flight after this
    sessions.close_all();
    return 0;
}

int run_mcp(const McpArgs& args) {
    std::ios::sync_with_stdio(false);
    spdlog::set_default_logger(spdlog::stderr_color_mt("agentd-mcp"));
    auto grant = load_grant(args.grant);
    if (!grant) {
        std::cerr << "agentd mcp: " << grant.error() << "\n";
        return 2;
    }
    ::signal(SIGPIPE, SIG_IGN);
    sigset_t stop;
    sigemptyset(&stop);
    for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&stop, s);
    pthread_sigmask(SIG_BLOCK, &stop, nullptr);  // inherited by every thread below

    AgentdClient client(args.socket);
    if (!args.http.empty()) return serve_http(args, client, *grant, stop);
    mcp::Server server([&client](std::string_view m, std::string_view t,
                                 const std::optional<nlohmann::json>& b) { return client.call(m, t, b); },
                       mcp::Options{args.tools, *grant, args.label});

    std::mutex out_mu;
    std::atomic<bool> out_broken{false};
    auto send = [&](const std::string& line) {
        std::lock_guard lk(out_mu);
        std::cout << line << '\n';
        std::cout.flush();
        if (!std::cout) out_broken = true;
    };
    auto close_task = [&] {
        if (auto r = server.close(); !r) std::cerr << "agentd mcp: closing the session's task: " << r.error() << "\n";
    };

    // Signals end the session like the end of stdin does.
    std::thread([&, stop] {
        int sig = 0;
        sigwait(&stop, &sig);
        close_task();
        std::cout.flush();
        std::_Exit(0);
    }).detach();

    struct Worker {
        std::jthread thread;
        std::shared_ptr<std::atomic<bool>> done;
    };
    std::vector<Worker> workers;
    std::string line;
    bool too_long = false;
    while (!out_broken && read_line(std::cin.rdbuf(), line, too_long)) {
        if (too_long) {
            send(rpc_error(mcp::kInvalidRequest, "the message is longer than " + std::to_string(kMaxLine) + " bytes").dump());
            continue;
        }
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.find_first_not_of(" \t") == std::string::npos) continue;
        auto parsed = parse_peer_json(line);
        if (!parsed) {
            send(rpc_error(mcp::kParseError, "parse error: the message " + parsed.error()).dump());
            continue;
        }
        nlohmann::json msg = std::move(*parsed);
        auto serve = [&server, &send](const nlohmann::json& m) {
            if (auto r = server.handle(m)) send(r->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
        };
        std::erase_if(workers, [](Worker& w) { return w.done->load(); });  // joins the finished ones
        // At most kMaxInFlight calls run side by side; beyond that the reader
        // waits for one (backpressure on the client).
        if (runs_long(msg) && workers.size() < kMaxInFlight) {
            auto done = std::make_shared<std::atomic<bool>>(false);
            workers.push_back({std::jthread([serve, done, m = std::move(msg)] {
                                   serve(m);
                                   *done = true;
                               }),
                               done});
        } else {
            serve(msg);
        }
    }
    workers.clear();  // waits for the calls in flight
    close_task();
    return 0;
}

}  // namespace

void register_mcp(CLI::App& app) {
    auto args = std::make_shared<McpArgs>();
    auto* mcp = app.add_subcommand("mcp", "serve the Model Context Protocol on stdio: one task per session, its tools as MCP tools");
    mcp->add_option("--socket", args->socket, "agentd's unix socket (default /run/bulwark/agentd.sock)");
    mcp->add_option("--grant", args->grant, "the task's grant: JSON, or @file");
    mcp->add_option("--tools", args->tools, "the tools of the task, comma-separated (default: every tool served)")
        ->delimiter(',');
    mcp->add_option("--label", args->label, "the task's label (default \"mcp session\")");
    mcp->add_option("--http", args->http,
                    "serve Streamable HTTP at http://HOST:PORT/mcp instead of stdio (loopback only; one task per session)");
    mcp->add_option("--token-sha256", args->token_sha256,
                    "SHA-256 of a bearer token HTTP clients must send (`agentd token-hash`); required with --http")
        ->delimiter(',');
    mcp->add_option("--session-idle-ms", args->session_idle_ms,
                    "with --http: a session unused this long ends and its task is closed (default 30 min)")
        ->check(CLI::Range(uint64_t(1), uint64_t(7) * 24 * 3600 * 1000));
    mcp->callback([args] { throw CLI::RuntimeError(run_mcp(*args)); });
}

}  // namespace bulwark
