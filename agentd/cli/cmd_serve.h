#pragma once
// `agentd serve`: the daemon (audit store, BPF runtime, kernel audit source, API server) until SIGTERM/SIGINT; `agentd token-hash`.

namespace CLI {
class App;
}

namespace bulwark {

void register_serve(CLI::App& app);

}  // namespace bulwark
