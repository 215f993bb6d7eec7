#include "tasks/record_operation.h"

#include <sys/socket.h>

#include "bulwark/policy/match.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace bulwark {
namespace {

// "tcp 10.0.0.1:443", "udp [2001:db8::1]:53 af 10" (render_object).
bool parse_net_object(std::string_view obj, policy::Operation& op) {
    if (obj.starts_with("tcp "))
        op.proto = BW_PROTO_TCP;
    else if (obj.starts_with("udp "))
        op.proto = BW_PROTO_UDP;
    else
        return false;
    obj.remove_prefix(4);
    if (auto sp = obj.find(' '); sp != std::string_view::npos) obj = obj.substr(0, sp);
    auto colon = obj.rfind(':');
    if (colon == std::string_view::npos) return false;
    std::string_view host = obj.substr(0, colon), port = obj.substr(colon + 1);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    auto addr = policy::parse_ip(host);
    if (!addr || port.empty() || port.size() > 5) return false;
    uint32_t p = 0;
    for (char c : port) {
        if (c < '0' || c > '9') return false;
        p = p * 10 + uint32_t(c - '0');
    }
    if (p > 65535) return false;
    op.addr = *addr;
    op.port = static_cast<uint16_t>(p);
    return true;
}

// "unix stream /run/app.sock" or "unix dgram @name" (audit_record.cpp writes
// bytes outside printable ASCII, and '\\', as \xNN): the address as the tool wrote it.
bool parse_unix_object(std::string_view obj, policy::Operation& op) {
    if (!obj.starts_with("unix ")) return false;
    obj.remove_prefix(5);
    auto sp = obj.find(' ');
    if (sp == std::string_view::npos) return false;
    obj.remove_prefix(sp + 1);
    if (obj.empty() || obj.front() == '(') return false;  // "(unreadable address)"
    auto hex = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; };
    std::string a;
    for (size_t i = 0; i < obj.size(); ++i) {
        int hi = i + 3 < obj.size() && obj[i] == '\\' && obj[i + 1] == 'x' ? hex(obj[i + 2]) : -1;
        int lo = hi >= 0 ? hex(obj[i + 3]) : -1;
        if (lo < 0) {
            a += obj[i];
            continue;
        }
        a += char(hi * 16 + lo);
        i += 3;
    }
    op.unix_addr = std::move(a);
    return true;
}

uint32_t detail_rights(const audit::AuditRecord& r) {
    if (r.detail.empty()) return 0;
    auto d = nlohmann::json::parse(r.detail, nullptr, false);
    if (!d.is_object() || !d.contains("rights") || !d["rights"].is_number_unsigned()) return 0;
    return d["rights"].get<uint32_t>();
}

}  // namespace

std::string explanation_of(const policy::Operation& op, const policy::Decision& d) {
    if (op.kind != policy::OpKind::Syscall) return d.explanation;
    return d.explanation + " (judged by name: the kernel's record of a seccomp denial carries no arguments)";
}

std::optional<policy::Operation> operation_of(const audit::AuditRecord& r) {
    if (r.kind != audit::RecordKind::Decision) return std::nullopt;
    policy::Operation op;
    switch (r.op) {
    case BW_OP_FILE_OPEN:
        op.kind = policy::OpKind::Open;
        op.access = (detail_rights(r) & BW_FS_WRITE) ? policy::FileAccess::Write : policy::FileAccess::Read;
        break;
    case BW_OP_FILE_TRUNCATE:
    case BW_OP_FILE_SETATTR:
        op.kind = policy::OpKind::Open;
        op.access = policy::FileAccess::Write;
        break;
    case BW_OP_FILE_CREATE:
    case BW_OP_MKDIR:
        op.kind = policy::OpKind::Create;
        break;
    case BW_OP_FILE_UNLINK:
        op.kind = policy::OpKind::Remove;
        break;
    case BW_OP_EXEC:
    case BW_OP_MMAP_EXEC:
    case BW_OP_PROC_EXEC:
        op.kind = policy::OpKind::Exec;
        break;
    case BW_OP_CONNECT:
        op.kind = policy::OpKind::Connect;
        return parse_net_object(r.object, op) || parse_unix_object(r.object, op) ? std::optional(op) : std::nullopt;
    case BW_OP_BIND:
        op.kind = policy::OpKind::Bind;
        return parse_net_object(r.object, op) || parse_unix_object(r.object, op) ? std::optional(op) : std::nullopt;
    case BW_OP_SENDMSG:
        op.kind = policy::OpKind::Send;
        return parse_net_object(r.object, op) || parse_unix_object(r.object, op) ? std::optional(op) : std::nullopt;
    case BW_OP_SYSCALL: {
        // seccomp rows from the kernel's audit log name the syscall and its
        // arch; the arguments are not recorded (judged as zero)
        if (r.layer != BW_LAYER_SECCOMP || r.object.empty() || r.object.starts_with("syscall ")) return std::nullopt;
        op.kind = policy::OpKind::Syscall;
        op.syscall = r.object;
        auto d = nlohmann::json::parse(r.detail.empty() ? "{}" : r.detail, nullptr, false);
        if (d.is_object() && d.contains("arch") && d["arch"].is_number_unsigned()) op.arch = d["arch"].get<uint32_t>();
        return op;
    }
    default:
        return std::nullopt;
    }
    if (r.object.empty() || r.object.front() != '/') return std::nullopt;  // "inode dev:ino"
    op.path = r.object;
    return op;
}

}  // namespace bulwark

namespace bulwark {

std::expected<policy::Operation, std::string> operation_from_json(const nlohmann::json& j) {
    using nlohmann::json;
    if (!j.is_object()) return std::unexpected("operation: must be an object");
    auto str = [&](const char* k) -> std::expected<std::string, std::string> {
        if (!j.contains(k)) return std::unexpected(std::string("operation.") + k + ": required");
        if (!j[k].is_string()) return std::unexpected(std::string("operation.") + k + ": must be a string");
        return j[k].get<std::string>();
    };
    auto kind_s = str("op");
    if (!kind_s) return std::unexpected(kind_s.error());
    auto kind = policy::parse_op_kind(*kind_s);
    if (!kind) return std::unexpected("operation.op: " + kind.error());
    policy::Operation op;
    op.kind = *kind;
    std::vector<std::string_view> allowed{"op"};
    switch (op.kind) {
    case policy::OpKind::Open:
    case policy::OpKind::Create:
    case policy::OpKind::Remove:
    case policy::OpKind::Exec: {
        auto p = str("path");
        if (!p) return std::unexpected(p.error());
        if (p->empty() || p->front() != '/') return std::unexpected("operation.path: must be absolute");
        op.path = *p;
        allowed.push_back("path");
        if (op.kind == policy::OpKind::Open) {
            allowed.push_back("access");
            std::string a = j.contains("access") && j["access"].is_string() ? j["access"].get<std::string>() : "";
            if (j.contains("access") && a != "read" && a != "write")
                return std::unexpected("operation.access: must be read or write");
            op.access = a == "write" ? policy::FileAccess::Write : policy::FileAccess::Read;
        }
        break;
    }
    case policy::OpKind::Connect:
    case policy::OpKind::Bind:
    case policy::OpKind::Send: {
        if (j.contains("unix")) {  // a unix socket: "/path" or "@name", as the tool wrote it
            auto u = str("unix");
            if (!u) return std::unexpected(u.error());
            if (u->empty()) return std::unexpected("operation.unix: a socket path or @name");
            op.unix_addr = *u;
            allowed.push_back("unix");
            break;
        }
        auto a = str("addr");
        if (!a) return std::unexpected(a.error());
        auto addr = policy::parse_ip(*a);
        if (!addr) return std::unexpected("operation.addr: not an IPv4 or IPv6 address");
        op.addr = *addr;
        if (!j.contains("port") || !j["port"].is_number_unsigned() || j["port"].get<uint64_t>() > 65535)
            return std::unexpected("operation.port: must be 0..65535");
        op.port = static_cast<uint16_t>(j["port"].get<uint64_t>());
        std::string proto = j.contains("proto") && j["proto"].is_string() ? j["proto"].get<std::string>() : "tcp";
        if (proto != "tcp" && proto != "udp") return std::unexpected("operation.proto: must be tcp or udp");
        op.proto = proto == "tcp" ? BW_PROTO_TCP : BW_PROTO_UDP;
        allowed.insert(allowed.end(), {"addr", "port", "proto"});
        break;
    }
    case policy::OpKind::Socket: {
        auto f = str("family");
        if (!f) return std::unexpected(f.error());
        auto fam = policy::parse_family(*f);
        if (!fam) return std::unexpected("operation.family: " + fam.error());
        op.family = *fam;
        auto t = str("type");
        if (!t) return std::unexpected(t.error());
        auto ty = policy::parse_sock_type(*t);
        if (!ty) return std::unexpected("operation.type: " + ty.error());
        op.type = *ty;
        allowed.insert(allowed.end(), {"family", "type"});
        break;
    }
    case policy::OpKind::Syscall: {
        auto n = str("name");
        if (!n) return std::unexpected(n.error());
        op.syscall = *n;
        allowed.push_back("name");
        break;
    }
    }
    for (auto it = j.begin(); it != j.end(); ++it)
        if (std::find(allowed.begin(), allowed.end(), it.key()) == allowed.end())
            return std::unexpected("operation." + it.key() + ": not a field of a " + *kind_s + " operation");
    return op;
}

}  // namespace bulwark
