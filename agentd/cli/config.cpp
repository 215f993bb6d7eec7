#include "cli/config.h"

#include <grp.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

namespace bulwark {
namespace {

struct ConfigError {
    std::string text;
};

class Reader {
public:
    explicit Reader(std::string name) : name_(std::move(name)) {}

    [[noreturn]] void fail(const YAML::Node& n, const std::string& msg) const {
        auto m = n.Mark();
        std::ostringstream o;
        o << name_;
        if (!m.is_null()) o << ":" << m.line + 1 << ":" << m.column + 1;
        o << ": error: " << msg;
        throw ConfigError{o.str()};
    }

    void check_keys(const YAML::Node& map, const std::string& where, std::initializer_list<const char*> known) const {
        if (!map.IsMap()) fail(map, "'" + where + "' must be a mapping");
        std::set<std::string> seen;
        for (auto it = map.begin(); it != map.end(); ++it) {
            if (!it->first.IsScalar()) fail(it->first, "keys in '" + where + "' must be plain names");
            auto k = it->first.Scalar();
            if (!seen.insert(k).second) fail(it->first, "duplicate key '" + k + "' in '" + where + "'");
            if (std::none_of(known.begin(), known.end(), [&](const char* x) { return k == x; })) {
                std::string list;
                for (auto x : known) list += std::string(list.empty() ? "" : ", ") + x;
                fail(it->first, "unknown key '" + k + "' in '" + where + "' (known keys: " + list + ")");
            }
        }
    }

    std::string str(const YAML::Node& n, const std::string& key) const {
        if (!n.IsScalar() || n.Scalar().empty()) fail(n, "'" + key + "' must be a non-empty string");
        return n.Scalar();
    }

    uint64_t u64(const YAML::Node& n, const std::string& key, uint64_t lo, uint64_t hi) const {
        if (!n.IsScalar()) fail(n, "'" + key + "' must be an integer");
        const auto& s = n.Scalar();
        uint64_t v = 0;
        auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || p != s.data() + s.size() || s.empty())
            fail(n, "'" + key + "' must be a non-negative integer, not '" + s + "'");
        if (v < lo || v > hi)
            fail(n, "'" + key + "' must be in " + std::to_string(lo) + ".." + std::to_string(hi));
        return v;
    }

    template <class T>
    std::vector<T> ulist(const YAML::Node& n, const std::string& key) const {
        if (!n.IsSequence()) fail(n, "'" + key + "' must be a list");
        std::vector<T> out;
        for (const auto& e : n) out.push_back(T(u64(e, key, 0, UINT32_MAX - 1)));
        return out;
    }

private:
    std::string name_;
};

void apply_otlp(telemetry::OtlpOptions& o, const YAML::Node& n, const Reader& r) {
    using std::chrono::milliseconds;
    r.check_keys(n, "otlp",
                 {"endpoint", "encoding", "headers", "queue_capacity", "batch_records", "batch_linger_ms", "timeout_ms",
                  "max_attempts", "initial_backoff_ms", "max_backoff_ms", "max_retry_after_ms", "shutdown_timeout_ms"});
    if (auto e = n["endpoint"]) {
        auto ep = telemetry::parse_endpoint(r.str(e, "otlp.endpoint"));
        if (!ep) r.fail(e, "'otlp.endpoint': " + ep.error());
        o.endpoint = std::move(*ep);
    }
    if (auto e = n["encoding"]) {
        auto enc = telemetry::parse_encoding(r.str(e, "otlp.encoding"));
        if (!enc) r.fail(e, "'otlp.encoding' must be protobuf or json");
        o.encoding = *enc;
    }
    if (auto h = n["headers"]) {
        if (!h.IsMap()) r.fail(h, "'otlp.headers' must be a mapping of header names to values");
        for (auto it = h.begin(); it != h.end(); ++it) {
            auto k = r.str(it->first, "otlp.headers");
            auto v = r.str(it->second, "otlp.headers." + k);
            auto token = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("!#$%&'*+-.^_`|~", c); };
            if (!std::all_of(k.begin(), k.end(), token)) r.fail(it->first, "'" + k + "' is not an HTTP header name");
            if (std::any_of(v.begin(), v.end(), [](char c) { return c == '\r' || c == '\n' || c == 0; }))
                r.fail(it->second, "'otlp.headers." + k + "' may not contain line breaks");
            o.headers.emplace_back(std::move(k), std::move(v));
        }
    }
    if (auto e = n["queue_capacity"]) o.queue_capacity = r.u64(e, "otlp.queue_capacity", 16, 16u << 20);
    if (auto e = n["batch_records"]) o.batch_records = r.u64(e, "otlp.batch_records", 1, 65536);
    if (auto e = n["batch_linger_ms"]) o.batch_linger = milliseconds(r.u64(e, "otlp.batch_linger_ms", 0, 60000));
    if (auto e = n["timeout_ms"]) o.timeout = milliseconds(r.u64(e, "otlp.timeout_ms", 10, 600000));
    if (auto e = n["max_attempts"]) o.max_attempts = unsigned(r.u64(e, "otlp.max_attempts", 1, 100));
    if (auto e = n["initial_backoff_ms"])
        o.initial_backoff = milliseconds(r.u64(e, "otlp.initial_backoff_ms", 1, 600000));
    if (auto e = n["max_backoff_ms"]) o.max_backoff = milliseconds(r.u64(e, "otlp.max_backoff_ms", 1, 600000));
    if (auto e = n["max_retry_after_ms"])
        o.max_retry_after = milliseconds(r.u64(e, "otlp.max_retry_after_ms", 0, 3600000));
    if (auto e = n["shutdown_timeout_ms"])
        o.shutdown_timeout = milliseconds(r.u64(e, "otlp.shutdown_timeout_ms", 0, 600000));
}

void apply(DaemonConfig& c, const YAML::Node& root, const Reader& r) {
    if (root.IsNull()) return;  // empty file: defaults
    r.check_keys(root, "top level",
                 {"state_dir", "rules_dir", "work_root", "log_level", "api", "audit", "dashboard", "otlp"});
    if (auto n = root["work_root"]) {
        c.work_root = r.str(n, "work_root");
        if (!c.work_root.is_absolute()) r.fail(n, "'work_root' must be an absolute path");
    }
    if (auto n = root["rules_dir"]) {
        c.rules_dir = r.str(n, "rules_dir");
        if (!c.rules_dir.is_absolute()) r.fail(n, "'rules_dir' must be an absolute path");
    }
    if (auto n = root["state_dir"]) {
        c.state_dir = r.str(n, "state_dir");
        if (!c.state_dir.is_absolute()) r.fail(n, "'state_dir' must be an absolute path");
    }
    if (auto n = root["log_level"]) {
        c.log_level = r.str(n, "log_level");
        static const std::set<std::string> ok{"trace", "debug", "info", "warn", "error", "critical", "off"};
        if (!ok.count(c.log_level)) r.fail(n, "'log_level' must be one of trace, debug, info, warn, error");
    }
    if (auto api = root["api"]) {
        r.check_keys(api, "api",
                     {"unix_socket", "socket_mode", "socket_group", "allowed_uids", "allowed_gids", "http",
                      "tokens_sha256", "max_connections", "run_threads", "header_limit_bytes", "body_limit_bytes",
                      "uri_limit_bytes", "read_timeout_ms", "write_timeout_ms"});
        auto& a = c.api;
        if (auto n = api["unix_socket"]) {
            a.unix_path = r.str(n, "api.unix_socket");
            if (!std::filesystem::path(*a.unix_path).is_absolute()) r.fail(n, "'api.unix_socket' must be absolute");
        }
        if (auto n = api["socket_mode"]) {
            auto s = r.str(n, "api.socket_mode");
            unsigned v = 0;
            auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 8);
            if (ec != std::errc() || p != s.data() + s.size() || v > 0777)
                r.fail(n, "'api.socket_mode' must be an octal mode such as \"0660\"");
            if (v & 0007) r.fail(n, "'api.socket_mode' must not grant access to others (o+rwx)");
            a.unix_mode = mode_t(v);
        }
        if (auto n = api["socket_group"]) {
            auto s = r.str(n, "api.socket_group");
            if (std::all_of(s.begin(), s.end(), ::isdigit)) {
                a.unix_group = gid_t(r.u64(n, "api.socket_group", 0, UINT32_MAX - 1));
            } else {
                struct group* g = getgrnam(s.c_str());
                if (!g) r.fail(n, "no such group '" + s + "'");
                a.unix_group = g->gr_gid;
            }
        }
        if (auto n = api["allowed_uids"]) a.allowed_uids = r.ulist<uid_t>(n, "api.allowed_uids");
        if (auto n = api["allowed_gids"]) a.allowed_gids = r.ulist<gid_t>(n, "api.allowed_gids");
        if (auto n = api["http"]) {
            auto l = parse_listen(r.str(n, "api.http"));
            if (!l) r.fail(n, l.error());
            a.tcp_host = l->first;
            a.tcp_port = l->second;
        }
        if (auto n = api["tokens_sha256"]) {
            if (!n.IsSequence()) r.fail(n, "'api.tokens_sha256' must be a list of 64-hex-digit SHA-256 hashes");
            for (const auto& e : n) {
                auto h = http::parse_token_hash(r.str(e, "api.tokens_sha256"));
                if (!h) r.fail(e, "not a SHA-256 hash (64 hex digits); `agentd token-hash` prints one");
                a.token_sha256.push_back(*h);
            }
        }
        if (auto n = api["max_connections"]) a.max_connections = r.u64(n, "api.max_connections", 1, 100000);
        if (auto n = api["run_threads"]) a.run_threads = static_cast<int>(r.u64(n, "api.run_threads", 1, 4096));
        if (auto n = api["header_limit_bytes"])
            a.limits.header_limit = r.u64(n, "api.header_limit_bytes", 1024, 1 << 20);
        if (auto n = api["body_limit_bytes"]) a.limits.body_limit = r.u64(n, "api.body_limit_bytes", 0, 64ull << 20);
        if (auto n = api["uri_limit_bytes"]) a.limits.uri_limit = r.u64(n, "api.uri_limit_bytes", 64, 1 << 20);
        if (auto n = api["read_timeout_ms"])
            a.read_timeout = std::chrono::milliseconds(r.u64(n, "api.read_timeout_ms", 100, 3600000));
        if (auto n = api["write_timeout_ms"])
            a.write_timeout = std::chrono::milliseconds(r.u64(n, "api.write_timeout_ms", 100, 3600000));
    }
    if (auto d = root["dashboard"]) {
        r.check_keys(d, "dashboard", {"enabled", "listen", "assets_dir"});
        if (auto n = d["enabled"]) {
            auto v = r.str(n, "dashboard.enabled");
            if (v != "true" && v != "false") r.fail(n, "'dashboard.enabled' must be true or false");
            c.dashboard.enabled = v == "true";
        }
        if (auto n = d["listen"]) {
            auto v = r.str(n, "dashboard.listen");
            if (v == "off") {
                c.dashboard.listen.reset();
            } else {
                auto l = parse_listen(v);
                if (!l) r.fail(n, l.error());
                c.dashboard.listen = *l;
            }
        }
        if (auto n = d["assets_dir"]) {
            c.dashboard.assets_dir = r.str(n, "dashboard.assets_dir");
            if (!c.dashboard.assets_dir.is_absolute()) r.fail(n, "'dashboard.assets_dir' must be an absolute path");
        }
    }
    if (auto o = root["otlp"]) apply_otlp(c.otlp, o, r);
    if (auto au = root["audit"]) {
        r.check_keys(au, "audit",
                     {"queue_capacity", "batch_rows", "batch_linger_us", "durability", "min_free_bytes",
                      "query_timeout_ms", "retention_days"});
        auto& o = c.audit;
        if (auto n = au["queue_capacity"]) o.queue_capacity = r.u64(n, "audit.queue_capacity", 16, 16u << 20);
        if (auto n = au["batch_rows"]) o.batch_rows = r.u64(n, "audit.batch_rows", 1, 1u << 20);
        if (auto n = au["batch_linger_us"])
            o.batch_linger = std::chrono::microseconds(r.u64(n, "audit.batch_linger_us", 0, 1000000));
        if (auto n = au["durability"]) {
            auto s = r.str(n, "audit.durability");
            if (s == "normal")
                o.durability = audit::Durability::NormalWithSyncPoints;
            else if (s == "full")
                o.durability = audit::Durability::Full;
            else
                r.fail(n, "'audit.durability' must be normal or full");
        }
        if (auto n = au["min_free_bytes"]) o.min_free_bytes = r.u64(n, "audit.min_free_bytes", 0, UINT64_MAX);
        if (auto n = au["query_timeout_ms"])
            o.query_timeout = std::chrono::milliseconds(r.u64(n, "audit.query_timeout_ms", 1, 600000));
        if (auto n = au["retention_days"]) {
            auto d = r.u64(n, "audit.retention_days", 0, 36500);
            if (d)
                o.retention = std::chrono::seconds(d * 86400);
            else
                o.retention.reset();
        }
    }
}

}  // namespace

DaemonConfig default_config() {
    DaemonConfig c;
    c.api.unix_path = "/run/bulwark/agentd.sock";
    c.api.allowed_uids = {0};
    if (geteuid() != 0) c.api.allowed_uids.push_back(geteuid());
    c.audit.retention = std::chrono::seconds(30 * 86400);
    std::error_code ec;
    c.rules_dir = std::filesystem::is_directory(BULWARK_INSTALLED_RULES_DIR, ec) ? BULWARK_INSTALLED_RULES_DIR
                                                                               : BULWARK_SOURCE_RULES_DIR;
    return c;
}

std::expected<std::pair<std::string, uint16_t>, std::string> parse_listen(const std::string& s) {
    std::string host;
    std::string port;
    if (!s.empty() && s.front() == '[') {
        auto close = s.find(']');
        if (close == std::string::npos || close + 1 >= s.size() || s[close + 1] != ':')
            return std::unexpected("listen address '" + s + "' must be host:port");
        host = s.substr(1, close - 1);
        port = s.substr(close + 2);
    } else {
        auto c = s.rfind(':');
        if (c == std::string::npos) return std::unexpected("listen address '" + s + "' must be host:port");
        host = s.substr(0, c);
        port = s.substr(c + 1);
    }
    if (host == "localhost") host = "127.0.0.1";
    if (host != "127.0.0.1" && host != "::1")
        return std::unexpected("the HTTP listener must be on the loopback (127.0.0.1 or [::1]), not '" + host + "'");
    unsigned v = 0;
    auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), v);
    if (ec != std::errc() || p != port.data() + port.size() || port.empty() || v > 65535)
        return std::unexpected("bad port '" + port + "' in '" + s + "'");
    return std::pair{host, uint16_t(v)};
}

std::expected<DaemonConfig, std::string> parse_config(const std::string& text, const std::string& name) {
    DaemonConfig c = default_config();
    Reader r(name);
    try {
        YAML::Node root = YAML::Load(text);
        apply(c, root, r);
    } catch (const ConfigError& e) {
        return std::unexpected(e.text);
    } catch (const YAML::Exception& e) {
        return std::unexpected(name + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                               ": error: " + e.msg);
    }
    return c;
}

std::expected<DaemonConfig, std::string> load_config(const std::filesystem::path& file) {
    std::ifstream in(file, std::ios::binary);
    if (!in) return std::unexpected(file.string() + ": error: cannot read: " + std::strerror(errno));
    std::ostringstream s;
    s << in.rdbuf();
    if (s.str().size() > (1 << 20)) return std::unexpected(file.string() + ": error: larger than 1 MiB");
    return parse_config(s.str(), file.string());
}

}  // namespace bulwark
