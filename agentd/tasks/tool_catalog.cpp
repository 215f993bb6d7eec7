#include "tasks/tool_catalog.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

#include <algorithm>

#include "bulwark/policy/compiler.h"

namespace bulwark {

std::expected<ToolCatalog, std::string> ToolCatalog::load(const std::filesystem::path& rules_dir) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::is_directory(rules_dir, ec))
        return std::unexpected("rules directory " + rules_dir.string() + " does not exist");
    ToolCatalog cat;
    cat.rules_dir_ = fs::canonical(rules_dir, ec);
    if (ec) return std::unexpected("rules directory " + rules_dir.string() + ": " + ec.message());
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(cat.rules_dir_, ec))
        if (e.is_regular_file() && e.path().extension() == ".yaml") files.push_back(e.path());
    if (ec) return std::unexpected("rules directory " + rules_dir.string() + ": " + ec.message());
    std::sort(files.begin(), files.end());
    policy::CompileOptions opts;
    opts.rules_dirs = {cat.rules_dir_.string()};
    std::string errors;
    for (const auto& f : files) {
        auto r = policy::compile_file(f.string(), opts);
        if (!r.ok()) {
            errors += policy::render_diagnostics(r);
            continue;
        }
        std::string name = f.stem().string();
        if (r.bundle->tool != name) {
            errors += f.string() + ": declares tool '" + r.bundle->tool + "' but the file is named for '" + name +
                      "'\n";
            continue;
        }
        cat.tools_.push_back(ToolEntry{std::move(name), f, std::move(*r.bundle)});
    }
    if (!errors.empty()) return std::unexpected(errors);
    // find() searches by name: "a-b.yaml" sorts before "a.yaml" as a path but
    // "a" before "a-b" as a name.
    std::sort(cat.tools_.begin(), cat.tools_.end(), [](const ToolEntry& a, const ToolEntry& b) { return a.name < b.name; });
    if (cat.tools_.empty()) return std::unexpected("rules directory " + rules_dir.string() + " holds no <tool>.yaml");
    return cat;
}

const ToolEntry* ToolCatalog::find(std::string_view name) const {
    auto it = std::lower_bound(tools_.begin(), tools_.end(), name,
                               [](const ToolEntry& t, std::string_view n) { return t.name < n; });
    return it != tools_.end() && it->name == name ? &*it : nullptr;
}

nlohmann::json ToolCatalog::summary(const ToolEntry& t) {
    nlohmann::json bins = nlohmann::json::array();
    for (const auto& b : t.bundle.binaries) bins.push_back(b.path);
    return {{"name", t.name},
            {"description", t.bundle.description},
            {"source", t.source.string()},
            {"hash", t.bundle.hash},
            {"mode", t.bundle.mode == policy::Mode::Audit ? "audit" : "enforce"},
            {"binaries", std::move(bins)},
            {"network", t.bundle.network.mode == policy::NetMode::Rules}};
}

std::expected<std::vector<std::string>, std::string> resolve_host(std::string_view host) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    std::string name(host);
    if (int rc = ::getaddrinfo(name.c_str(), nullptr, &hints, &res); rc != 0)
        return std::unexpected("cannot resolve " + name + ": " + gai_strerror(rc));
    std::vector<std::string> out;
    for (addrinfo* a = res; a; a = a->ai_next) {
        char buf[INET6_ADDRSTRLEN] = {};
        const void* src = a->ai_family == AF_INET
                              ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr)
                              : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr);
        if (::inet_ntop(a->ai_family, src, buf, sizeof buf)) out.emplace_back(buf);
    }
    ::freeaddrinfo(res);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

std::expected<policy::Bundle, std::string> instantiate_tool(const policy::Bundle& compiled,
                                                           const policy::TaskVars& vars,
                                                           const policy::Resolver& resolve) {
    auto bundle = policy::instantiate(compiled, vars, resolve);
    if (bundle) return std::move(*bundle);
    std::string where;
    if (const auto* r = compiled.rule(bundle.error().rule_id))
        where = r->loc.text() + ": ";
    return std::unexpected(where + "cannot instantiate " + compiled.tool + ": " + bundle.error().message);
}

}  // namespace bulwark
