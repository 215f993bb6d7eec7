#pragma once
// `agentd mcp`: the MCP server on stdio or Streamable HTTP, a client of a running daemon.

namespace CLI {
class App;
}

namespace bulwark {

void register_mcp(CLI::App& app);

}  // namespace bulwark
