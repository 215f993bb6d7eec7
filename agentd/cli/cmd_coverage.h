#pragma once
// `agentd coverage`: each tool's launch planned as `agentd run` would plan it, stopping before anything starts.

namespace CLI {
class App;
}

namespace bulwark {

void register_coverage(CLI::App& app);

}  // namespace bulwark
