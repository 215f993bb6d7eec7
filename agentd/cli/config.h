#pragma once
// agentd serve configuration: defaults, the YAML file (yaml-cpp), and errors
// that name the file, line and column ("agentd.yaml:4:3: unknown key ...").
//
//   state_dir: /var/lib/bulwark        # audit.db and default task work directories
//   rules_dir: /usr/local/share/bulwark/rules   # the tools served (<tool>.yaml)
//   work_root: /var/lib/bulwark-tasks  # default task work directories (<id>/), mode 0711
//   log_level: info                    # trace debug info warn error
//   api:
//     unix_socket: /run/bulwark/agentd.sock
//     socket_mode: "0660"              # octal
//     socket_group: bulwark            # group name or gid (optional)
//     allowed_uids: [0]                # default: root and agentd's own uid
//     allowed_gids: []
//     http: 127.0.0.1:7878             # optional; loopback only
//     tokens_sha256: [<64 hex>]        # `agentd token-hash` prints one
//     max_connections: 512
//     run_threads: 64                  # synchronous execs served at once
//     header_limit_bytes: 16384
//     body_limit_bytes: 1048576
//     uri_limit_bytes: 8192
//     read_timeout_ms: 10000
//     write_timeout_ms: 10000
//   dashboard:
//     enabled: true                    # serve the page; token in <state_dir>/dashboard.token
//     listen: 127.0.0.1:7878           # when api.http is not set; "off": none. A default
//                                      # listener whose port is taken is skipped (warned)
//     assets_dir: /usr/local/share/bulwark/dashboard   # default: installed, else build tree
//   audit:
//     queue_capacity: 65536
//     batch_rows: 8192
//     batch_linger_us: 1000
//     durability: normal               # normal (sync points) | full
//     min_free_bytes: 67108864
//     query_timeout_ms: 2000
//     retention_days: 30               # 0 = keep forever
//   otlp:                              # export every audit record as an OTLP log record
//     endpoint: http://127.0.0.1:4318/v1/logs   # none: no export (--otlp-endpoint)
//     encoding: protobuf               # protobuf | json (--otlp-encoding)
//     headers: {authorization: "Bearer ..."}    # sent with every request
//     queue_capacity: 65536            # records waiting for the exporter
//     batch_records: 1024
//     batch_linger_ms: 200
//     timeout_ms: 10000                # one request
//     max_attempts: 5                  # of one batch, retries included
//     initial_backoff_ms: 500          # doubled per retry up to max_backoff_ms
//     max_backoff_ms: 5000
//     max_retry_after_ms: 60000        # a longer Retry-After is cut to this
//     shutdown_timeout_ms: 5000
#include <expected>
#include <filesystem>
#include <optional>
#include <utility>
#include <string>

#include "audit/audit_db.h"
#include "api/http_server.h"
#include "telemetry/otlp_exporter.h"

namespace bulwark {

struct DashboardConfig {
    bool enabled = true;
    // The listener used when api.http is not configured (soft: skipped with a
    // warning when the port is taken); nullopt: none.
    std::optional<std::pair<std::string, uint16_t>> listen = std::pair<std::string, uint16_t>{"127.0.0.1", 7878};
    std::filesystem::path assets_dir;  // empty: dashboard::default_assets_dir()
};

struct DaemonConfig {
    std::filesystem::path state_dir = "/var/lib/bulwark";
    // The shipped rules: the installed copy, else the source tree's.
    std::filesystem::path rules_dir;
    // Default task work directories. Apart from the state directory (0700:
    // the sandbox uid must reach its work directory, never the database).
    std::filesystem::path work_root = "/var/lib/bulwark-tasks";
    std::string log_level = "info";
    http::ServerConfig api;
    audit::StoreOptions audit;  // path is state_dir/audit.db unless set
    DashboardConfig dashboard;
    telemetry::OtlpOptions otlp;  // endpoint.url empty: no export
};

DaemonConfig default_config();
// Reads file over the defaults. Unknown keys, wrong types and bad values are
// errors, never ignored.
std::expected<DaemonConfig, std::string> load_config(const std::filesystem::path& file);
std::expected<DaemonConfig, std::string> parse_config(const std::string& text, const std::string& name);
// Parses "127.0.0.1:7878", "[::1]:7878", "localhost:7878".
std::expected<std::pair<std::string, uint16_t>, std::string> parse_listen(const std::string& s);

}  // namespace bulwark
