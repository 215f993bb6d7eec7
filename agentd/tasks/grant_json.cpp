#include "tasks/grant_json.h"

#include <sys/socket.h>

#include "bulwark/policy/values.h"

namespace bulwark {
namespace {

using nlohmann::json;

struct Bad {
    std::string message;
};

constexpr std::pair<std::string_view, uint32_t> kRights[] = {
    {"read", BW_FS_READ}, {"write", BW_FS_WRITE}, {"create", BW_FS_CREATE}, {"remove", BW_FS_REMOVE}, {"exec", BW_FS_EXEC}};

[[noreturn]] void fail(const std::string& field, const std::string& msg) { throw Bad{field + ": " + msg}; }

void only_keys(const json& obj, const std::string& field, std::initializer_list<std::string_view> keys) {
    if (!obj.is_object()) fail(field, "must be an object");
    for (auto it = obj.begin(); it != obj.end(); ++it)
        if (std::find(keys.begin(), keys.end(), it.key()) == keys.end()) fail(field, "unknown key '" + it.key() + "'");
}

const std::string& str(const json& v, const std::string& field) {
    if (!v.is_string()) fail(field, "must be a string");
    return v.get_ref<const std::string&>();
}

const json& arr(const json& v, const std::string& field) {
    if (!v.is_array()) fail(field, "must be an array");
    return v;
}

uint64_t count(const json& v, const std::string& field, uint64_t min, uint64_t max) {
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
        fail(field, "must be a non-negative integer");
    uint64_t n = v.get<uint64_t>();
    if (n < min || n > max) fail(field, "must be " + std::to_string(min) + ".." + std::to_string(max));
    return n;
}

template <class F>
uint32_t names_to_bits(const json& v, const std::string& field, std::string_view what, F lookup) {
    uint32_t bits = 0;
    if (arr(v, field).empty()) fail(field, "must name at least one " + std::string(what));
    for (size_t i = 0; i < v.size(); ++i) {
        std::string f = field + "[" + std::to_string(i) + "]";
        const auto& name = str(v[i], f);
        auto b = lookup(name);
        if (!b) fail(f, "unknown " + std::string(what) + " '" + name + "'");
        bits |= *b;
    }
    return bits;
}

std::optional<uint32_t> right_bit(std::string_view n) {
    for (auto [name, bit] : kRights)
        if (name == n) return bit;
    return std::nullopt;
}

policy::FileGrant file_grant(const json& v, const std::string& field, const policy::TaskVars& vars) {
    only_keys(v, field, {"path", "rights"});
    if (!v.contains("path")) fail(field, "'path' is required");
    if (!v.contains("rights")) fail(field, "'rights' is required");
    auto path = policy::substitute_path(str(v["path"], field + ".path"), vars);
    if (!path) fail(field + ".path", path.error());
    return {*path, names_to_bits(v["rights"], field + ".rights", "right", right_bit)};
}

policy::NetGrant net_grant(const json& v, const std::string& field) {
    only_keys(v, field, {"host", "cidr", "ports", "proto", "ops"});
    policy::NetGrant g;
    if (v.contains("host") == v.contains("cidr")) fail(field, "give exactly one of 'host' and 'cidr'");
    if (v.contains("host")) {
        auto h = policy::validate_hostname(str(v["host"], field + ".host"));
        if (!h) fail(field + ".host", h.error());
        g.host = *h;
    } else {
        auto c = policy::parse_cidr(str(v["cidr"], field + ".cidr"));
        if (!c) fail(field + ".cidr", c.error());
        g.addr = c->addr;
        g.prefix = c->prefix;
    }
    if (v.contains("ports")) {
        const auto& p = v["ports"];
        std::string text = p.is_number_unsigned() ? std::to_string(p.get<uint64_t>()) : str(p, field + ".ports");
        auto r = policy::parse_port_range(text);
        if (!r) fail(field + ".ports", r.error());
        g.port_lo = r->lo;
        g.port_hi = r->hi;
    }
    if (v.contains("proto"))
        g.proto_mask = static_cast<uint8_t>(names_to_bits(v["proto"], field + ".proto", "protocol",
                                                          [](std::string_view n) -> std::optional<uint32_t> {
                                                              if (n == "tcp") return BW_PROTO_TCP;
                                                              if (n == "udp") return BW_PROTO_UDP;
                                                              return std::nullopt;
                                                          }));
    if (v.contains("ops"))
        g.op_mask = static_cast<uint8_t>(names_to_bits(v["ops"], field + ".ops", "operation",
                                                       [](std::string_view n) -> std::optional<uint32_t> {
                                                           if (n == "connect") return BW_NET_CONNECT;
                                                           if (n == "bind") return BW_NET_BIND;
                                                           if (n == "send") return BW_NET_SEND;
                                                           return std::nullopt;
                                                       }));
    return g;
}

}  // namespace

nlohmann::json rights_json(uint32_t rights) {
    json out = json::array();
    for (auto [name, bit] : kRights)
        if (rights & bit) out.push_back(name);
    return out;
}

std::expected<policy::Grant, std::string> grant_from_json(const json& j, const policy::TaskVars& vars,
                                                          std::string_view where) {
    const std::string w(where);
    try {
        only_keys(j, w, {"files", "network", "families", "limits", "microvm"});
        policy::Grant g;
        if (j.contains("files")) {
            const auto& f = arr(j["files"], w + ".files");
            std::vector<policy::FileGrant> files;
            for (size_t i = 0; i < f.size(); ++i)
                files.push_back(file_grant(f[i], w + ".files[" + std::to_string(i) + "]", vars));
            g.files = std::move(files);
        }
        if (j.contains("network")) {
            const auto& n = j["network"];
            if (n.is_string()) {
                if (n.get<std::string>() != "none") fail(w + ".network", "must be \"none\" or a list of rules");
                g.network_none = true;
            } else {
                const auto& a = arr(n, w + ".network");
                std::vector<policy::NetGrant> net;
                for (size_t i = 0; i < a.size(); ++i)
                    net.push_back(net_grant(a[i], w + ".network[" + std::to_string(i) + "]"));
                g.network = std::move(net);
            }
        }
        if (j.contains("families")) {
            const auto& a = arr(j["families"], w + ".families");
            uint64_t fam = 0;
            for (size_t i = 0; i < a.size(); ++i) {
                std::string f = w + ".families[" + std::to_string(i) + "]";
                const auto& name = str(a[i], f);
                bool found = false;
                for (const auto& [n, num] : policy::socket_families())
                    if (n == name) {
                        fam |= uint64_t(1) << num;
                        found = true;
                    }
                if (!found) fail(f, "unknown socket family '" + name + "'");
            }
            g.families = fam;
        }
        if (j.contains("limits")) {
            const auto& l = j["limits"];
            std::string f = w + ".limits";
            only_keys(l, f, {"timeout_ms", "memory_bytes", "pids", "output_bytes", "cpu_percent", "file_size_bytes",
                             "open_files"});
            constexpr uint64_t big = uint64_t(1) << 50;
            if (l.contains("timeout_ms")) g.limits.timeout_ms = count(l["timeout_ms"], f + ".timeout_ms", 1, big);
            if (l.contains("memory_bytes"))
                g.limits.memory_bytes = count(l["memory_bytes"], f + ".memory_bytes", 1 << 20, big);
            if (l.contains("pids")) g.limits.pids = count(l["pids"], f + ".pids", 1, 1 << 22);
            if (l.contains("output_bytes"))
                g.limits.output_bytes = count(l["output_bytes"], f + ".output_bytes", 0, big);
            if (l.contains("cpu_percent"))
                g.limits.cpu_percent = static_cast<uint32_t>(count(l["cpu_percent"], f + ".cpu_percent", 1, 100000));
            if (l.contains("file_size_bytes"))
                g.limits.file_size_bytes = count(l["file_size_bytes"], f + ".file_size_bytes", 0, big);
            if (l.contains("open_files")) g.limits.open_files = count(l["open_files"], f + ".open_files", 4, 1 << 20);
        }
        if (j.contains("microvm")) {
            const auto& m = j["microvm"];
            std::string f = w + ".microvm";
            only_keys(m, f, {"mode", "memory_bytes", "vcpus"});
            if (m.contains("mode")) {
                const auto& mode = str(m["mode"], f + ".mode");
                if (mode == "off") g.microvm_mode = policy::MicroVmMode::Off;
                else if (mode == "preferred") g.microvm_mode = policy::MicroVmMode::Preferred;
                else if (mode == "required") g.microvm_mode = policy::MicroVmMode::Required;
                else fail(f + ".mode", "must be \"off\", \"preferred\" or \"required\"");
            }
            if (m.contains("memory_bytes"))
                g.microvm_memory_bytes = count(m["memory_bytes"], f + ".memory_bytes", 128 << 20, uint64_t(64) << 30);
            if (m.contains("vcpus")) g.microvm_vcpus = static_cast<uint32_t>(count(m["vcpus"], f + ".vcpus", 1, 64));
        }
        return g;
    } catch (const Bad& b) {
        return std::unexpected(b.message);
    }
}

}  // namespace bulwark
