#include "telemetry/otlp_log.h"

#include <charconv>
#include <cstring>

#include <bulwark_abi.h>

#include "common/sys_error.h"
#include "telemetry/ocsf.h"

namespace bulwark::telemetry {
namespace {

using audit::RecordKind;
using nlohmann::json;

// Length of the valid UTF-8 sequence at s[i], or 0 when the byte there does
// not start one (overlong forms, surrogates and code points past U+10FFFF
// are invalid).
size_t utf8_seq(std::string_view s, size_t i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) return 1;
    size_t n;
    uint32_t cp;
    if ((c & 0xe0) == 0xc0) n = 2, cp = c & 0x1f;
    else if ((c & 0xf0) == 0xe0) n = 3, cp = c & 0x0f;
    else if ((c & 0xf8) == 0xf0) n = 4, cp = c & 0x07;
    else return 0;
    if (i + n > s.size()) return 0;
    for (size_t k = 1; k < n; ++k) {
        auto cc = static_cast<unsigned char>(s[i + k]);
        if ((cc & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (cc & 0x3f);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return n;
}

class Builder {
public:
    explicit Builder(LogRecord& lr) : lr_(lr) { lr_.attributes.reserve(40); }

    void str(std::string_view key, std::string_view v) {
        Attribute a{key, {}};
        if (auto fixed = sanitize_utf8(v)) {
            a.value.owned = std::move(*fixed);
            a.value.uses_owned = true;
        } else {
            a.value.view = v;
        }
        lr_.attributes.push_back(std::move(a));
    }
    void owned(std::string_view key, std::string v) {
        Attribute a{key, {}};
        auto fixed = sanitize_utf8(v);
        a.value.owned = fixed ? std::move(*fixed) : std::move(v);
        a.value.uses_owned = true;
        lr_.attributes.push_back(std::move(a));
    }
    void num(std::string_view key, int64_t v) {
        Attribute a{key, {}};
        a.value.kind = AttrValue::Kind::Int;
        a.value.i = v;
        lr_.attributes.push_back(std::move(a));
    }
    void flag(std::string_view key, bool v) {
        Attribute a{key, {}};
        a.value.kind = AttrValue::Kind::Bool;
        a.value.b = v;
        lr_.attributes.push_back(std::move(a));
    }

private:
    LogRecord& lr_;
};

// An IP or unix address as render_object (audit/audit_record.cpp) writes it:
// "tcp 10.0.0.1:443", "udp [2001:db8::1]:53 af 10", "unix stream /run/x.sock".
struct NetObject {
    std::string_view protocol;  // tcp, udp, stream, dgram, ...
    std::string_view ip;
    std::optional<int64_t> port;
    std::string_view unix_address;  // a path, or "@" and an abstract name
};

std::optional<NetObject> parse_net_object(std::string_view o) {
    NetObject n;
    if (o.starts_with("unix ")) {
        auto rest = o.substr(5);
        auto sp = rest.find(' ');
        if (sp == std::string_view::npos) return std::nullopt;
        n.protocol = rest.substr(0, sp);
        n.unix_address = rest.substr(sp + 1);
        return n;
    }
    auto sp = o.find(' ');
    if (sp == std::string_view::npos) return std::nullopt;
    n.protocol = o.substr(0, sp);
    auto addr = o.substr(sp + 1);
    std::string_view port;
    if (addr.starts_with('[')) {
        auto close = addr.find("]:");
        if (close == std::string_view::npos) return std::nullopt;
        n.ip = addr.substr(1, close - 1);
        port = addr.substr(close + 2);
        port = port.substr(0, port.find(' '));  // " af 10"
    } else {
        auto colon = addr.rfind(':');
        if (colon == std::string_view::npos) return std::nullopt;
        n.ip = addr.substr(0, colon);
        port = addr.substr(colon + 1);
    }
    int64_t p = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (ec != std::errc() || end != port.data() + port.size()) return std::nullopt;
    n.port = p;
    return n;
}

std::string_view basename_of(std::string_view path) {
    auto slash = path.rfind('/');
    return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// The object of a decision in OCSF's terms: the file, the endpoint, the
// process acted on.
void object_attributes(Builder& b, const audit::AuditRecord& r, const OcsfClass& c) {
    if (r.object.empty()) return;
    if (c.class_uid == 1001) {
        b.str("ocsf.file.path", r.object);
        b.str("ocsf.file.name", basename_of(r.object));
    } else if (c.class_uid == 4001) {
        auto n = parse_net_object(r.object);
        if (!n) return;
        // a bind names the tool's own address; the others the peer's
        const bool local = r.op == BW_OP_BIND;
        b.str("ocsf.connection_info.protocol_name", n->protocol);
        if (!n->unix_address.empty()) {
            b.str(local ? "ocsf.src_endpoint.name" : "ocsf.dst_endpoint.name", n->unix_address);
        } else {
            b.str(local ? "ocsf.src_endpoint.ip" : "ocsf.dst_endpoint.ip", n->ip);
            if (n->port) b.num(local ? "ocsf.src_endpoint.port" : "ocsf.dst_endpoint.port", *n->port);
        }
    } else if (c.class_uid == 1007) {
        if (r.op == BW_OP_EXEC || r.op == BW_OP_PROC_EXEC) {
            b.str("ocsf.process.file.path", r.object);
        } else if (r.object.starts_with("pid ")) {  // "pid 42 arg 9"
            auto rest = std::string_view(r.object).substr(4);
            int64_t pid = 0;
            auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), pid);
            if (ec == std::errc() && end != rest.data()) b.num("ocsf.process.pid", pid);
        }
    }
}

void ocsf_attributes(Builder& b, const audit::AuditRecord& r, const OcsfClass& c) {
    b.num("ocsf.class_uid", c.class_uid);
    b.str("ocsf.class_name", c.class_name);
    b.num("ocsf.category_uid", c.category_uid);
    b.str("ocsf.category_name", c.category_name);
    b.num("ocsf.activity_id", c.activity_id);
    b.str("ocsf.activity_name", c.activity_name);
    b.num("ocsf.type_uid", int64_t(c.type_uid()));
    b.str("ocsf.type_name", c.type_name);
    b.num("ocsf.severity_id", c.severity_id);
    b.str("ocsf.severity", c.severity);
    b.num("ocsf.status_id", c.status_id);
    b.str("ocsf.status", c.status);
    if (r.kind == RecordKind::Decision && r.err) b.owned("ocsf.status_code", errno_name(r.err));
    if (c.has_action) {
        b.num("ocsf.action_id", c.action_id);
        b.str("ocsf.action", c.action);
        b.num("ocsf.disposition_id", c.disposition_id);
        b.str("ocsf.disposition", c.disposition);
    }
    b.str("ocsf.metadata.version", kOcsfVersion);
    b.str("ocsf.metadata.product.name", "Bulwark");
}

void run_attributes(Builder& b, const RunInfo* run, const json& detail) {
    // The run's container: its start record's, or the record's own.
    const json* own = detail.is_object() && detail.contains("container") && detail["container"].is_object()
                          ? &detail["container"]
                          : nullptr;
    auto field = [&](std::string_view key, const std::string& from_run, const char* json_key) {
        if (own && (*own).contains(json_key) && (*own)[json_key].is_string())
            b.owned(key, (*own)[json_key].get<std::string>());
        else if (run && !from_run.empty())
            b.str(key, from_run);
    };
    static const std::string none;
    field("container.id", run ? run->container_id : none, "id");
    field("k8s.pod.name", run ? run->pod_name : none, "pod_name");
    field("k8s.namespace.name", run ? run->pod_namespace : none, "pod_namespace");
    field("k8s.pod.uid", run ? run->pod_uid : none, "pod_uid");
    field("k8s.container.name", run ? run->container_name : none, "container_name");
}

// "deny file_open /etc/shadow (landlock, rules/cat.yaml:12, EACCES)"
void decision_body(std::string& s, const audit::AuditRecord& r) {
    s += audit::decision_name(r.decision);
    s += ' ';
    s += audit::op_name(r.op);
    if (!r.object.empty()) {
        s += ' ';
        s += r.object;
    }
    s += " (";
    s += audit::layer_name(r.layer);
    if (!r.rule_file.empty()) {
        s += ", ";
        s += r.rule_file;
        s += ':';
        s += std::to_string(r.rule_line);
    } else if (r.rule_id == BW_NO_RULE) {
        s += ", the policy's default";
    }
    if (r.err) {
        s += ", ";
        s += errno_name(r.err);
    }
    s += ')';
}

std::string run_label(const audit::AuditRecord& r) {
    return r.tool + " (task " + std::to_string(r.task_id) + ", run " + std::to_string(r.run_id) + ")";
}

}  // namespace

std::optional<std::string> sanitize_utf8(std::string_view s) {
    size_t i = 0;
    // ASCII, eight bytes at a time: most of what is exported
    for (uint64_t w; i + 8 <= s.size(); i += 8) {
        std::memcpy(&w, s.data() + i, 8);
        if (w & 0x8080808080808080ull) break;
    }
    while (i < s.size()) {
        size_t n = utf8_seq(s, i);
        if (!n) break;
        i += n;
    }
    if (i == s.size()) return std::nullopt;
    std::string out(s.substr(0, i));
    while (i < s.size()) {
        size_t n = utf8_seq(s, i);
        if (n) {
            out.append(s.substr(i, n));
            i += n;
        } else {
            out += "\xef\xbf\xbd";  // U+FFFD
            ++i;
        }
    }
    return out;
}

RunInfo run_info_from_detail(const json& detail) {
    RunInfo ri;
    if (!detail.is_object()) return ri;
    if (auto it = detail.find("traceparent"); it != detail.end() && it->is_string())
        if (auto t = parse_traceparent(it->get_ref<const std::string&>())) ri.trace = std::move(*t);
    if (auto it = detail.find("container"); it != detail.end() && it->is_object()) {
        auto get = [&](const char* k) {
            auto f = it->find(k);
            return f != it->end() && f->is_string() ? f->get<std::string>() : std::string();
        };
        ri.container_id = get("id");
        ri.pod_name = get("pod_name");
        ri.pod_namespace = get("pod_namespace");
        ri.pod_uid = get("pod_uid");
        ri.container_name = get("container_name");
    }
    return ri;
}

const AttrValue* LogRecord::find(std::string_view key) const {
    for (const auto& a : attributes)
        if (a.key == key) return &a.value;
    return nullptr;
}

std::string_view severity_text(Severity s) {
    switch (s) {
    case Severity::Warn: return "WARN";
    case Severity::Error: return "ERROR";
    default: return "INFO";
    }
}

LogRecord to_log_record(const audit::AuditRecord& r, const RunInfo* run, int64_t observed_ns) {
    LogRecord lr;
    to_log_record(r, run, observed_ns, lr);
    return lr;
}

void to_log_record(const audit::AuditRecord& r, const RunInfo* run, int64_t observed_ns, LogRecord& lr) {
    lr.attributes.clear();  // their room is kept
    lr.body.clear();
    lr.has_trace = false;
    lr.flags = 0;
    lr.time_ns = r.ts_ns;
    lr.observed_ns = observed_ns;
    // A decision's detail is small (file rights) and read only when it may
    // name a container; the other kinds' details are read for their fields.
    json detail;
    if (!r.detail.empty() && (r.kind != RecordKind::Decision || r.detail.find("container") != std::string::npos))
        detail = json::parse(r.detail, nullptr, false);
    const OcsfClass c = classify(r, detail);
    lr.severity = c.severity_id >= 4 ? Severity::Error : c.severity_id >= 3 ? Severity::Warn : Severity::Info;
    if (run && run->trace) {
        lr.has_trace = true;
        lr.trace_id = run->trace->trace_id;
        lr.span_id = run->trace->span_id;
        lr.flags = run->trace->flags;
    }

    Builder b(lr);
    if (r.seq) b.num("bulwark.seq", int64_t(r.seq));
    b.str("bulwark.kind", audit::kind_name(r.kind));
    if (r.task_id) b.num("bulwark.task_id", int64_t(r.task_id));
    if (r.run_id) b.num("bulwark.run_id", int64_t(r.run_id));
    if (!r.tool.empty()) b.str("bulwark.tool", r.tool);
    if (r.policy_version) b.num("bulwark.policy_version", int64_t(r.policy_version));
    ocsf_attributes(b, r, c);
    run_attributes(b, run, detail);

    switch (r.kind) {
    case RecordKind::Decision:
        lr.event_name = "bulwark.decision";
        decision_body(lr.body, r);
        b.str("bulwark.decision", audit::decision_name(r.decision));
        b.str("bulwark.layer", audit::layer_name(r.layer));
        b.str("bulwark.op", audit::op_name(r.op));
        if (!r.object.empty()) b.str("bulwark.object", r.object);
        if (r.err) b.num("bulwark.errno", r.err);
        if (r.rule_id != BW_NO_RULE) {
            b.num("bulwark.rule.id", r.rule_id);
            if (!r.rule_file.empty()) {
                b.str("bulwark.rule.file", r.rule_file);
                b.num("bulwark.rule.line", r.rule_line);
                b.str("bulwark.rule.text", r.rule_text);
            }
        } else {
            b.flag("bulwark.rule.default", true);  // the policy's default decided
        }
        if (r.pid) b.num("ocsf.actor.process.pid", r.pid);
        if (!r.comm.empty()) b.str("ocsf.actor.process.name", r.comm);
        object_attributes(b, r, c);
        break;
    case RecordKind::RunStart: {
        lr.event_name = "bulwark.run_start";
        std::string cmd;
        if (detail.is_object() && detail.contains("argv") && detail["argv"].is_array())
            for (const auto& a : detail["argv"])
                if (a.is_string()) cmd += (cmd.empty() ? "" : " ") + a.get<std::string>();
        lr.body = "run_start " + run_label(r) + (cmd.empty() ? "" : ": " + cmd);
        b.str("ocsf.actor.process.name", "agentd");
        b.str("ocsf.process.name", r.tool);
        if (!cmd.empty()) b.owned("ocsf.process.cmd_line", std::move(cmd));
        break;
    }
    case RecordKind::RunExit: {
        lr.event_name = "bulwark.run_exit";
        std::string reason = detail.is_object() ? detail.value("reason", std::string()) : std::string();
        int64_t code = detail.is_object() && detail.contains("code") && detail["code"].is_number_integer()
                           ? detail["code"].get<int64_t>()
                           : 0;
        lr.body = "run_exit " + run_label(r) + ": " + reason + " " + std::to_string(code);
        b.str("ocsf.process.name", r.tool);
        b.num("ocsf.exit_code", code);
        b.owned("bulwark.exit.reason", std::move(reason));
        break;
    }
    case RecordKind::PolicyEpoch: {
        lr.event_name = "bulwark.policy_epoch";
        std::string change = detail.is_object() ? detail.value("change", std::string()) : std::string();
        lr.body = "policy_epoch " + change + " of " + r.tool + " (version " + std::to_string(r.policy_version) + ")";
        b.owned("bulwark.epoch.change", std::move(change));
        break;
    }
    case RecordKind::Gap: {
        lr.event_name = "bulwark.gap";
        std::string source = detail.is_object() ? detail.value("source", std::string()) : std::string();
        uint64_t count = detail.is_object() ? detail.value("count", uint64_t(0)) : 0;
        lr.body = "gap: " + std::to_string(count) + " records lost (" + source + ")";
        b.num("bulwark.gap.count", int64_t(count));
        b.owned("bulwark.gap.source", std::move(source));
        break;
    }
    case RecordKind::HostStatus: {
        lr.event_name = "bulwark.host_status";
        std::string event = detail.is_object() ? detail.value("event", std::string()) : std::string();
        lr.body = "host_status " + event;
        b.owned("bulwark.host.event", std::move(event));
        break;
    }
    case RecordKind::Finding: {
        lr.event_name = "bulwark.finding";
        lr.body = detail.is_object() ? detail.value("summary", std::string("finding")) : std::string("finding");
        b.str("ocsf.process.name", r.tool);
        break;
    }
    case RecordKind::Profile: {
        lr.event_name = "bulwark.profile";
        std::string change = detail.is_object() ? detail.value("change", std::string()) : std::string();
        lr.body = "profile " + change + " of " + r.tool;
        b.owned("bulwark.profile.change", std::move(change));
        break;
    }
    }
    if (!r.detail.empty()) b.str("bulwark.detail", r.detail);
    if (auto fixed = sanitize_utf8(lr.body)) lr.body = std::move(*fixed);
}

LogRecord export_gap_record(uint64_t count, std::string_view why, int64_t now_ns) {
    LogRecord lr;
    lr.time_ns = now_ns;
    lr.observed_ns = now_ns;
    lr.severity = Severity::Error;
    lr.event_name = "bulwark.export_gap";
    lr.body = "export gap: " + std::to_string(count) + " audit records not exported (" + std::string(why) + ")";
    Builder b(lr);
    b.str("bulwark.kind", "export_gap");
    b.num("ocsf.class_uid", 0);
    b.str("ocsf.class_name", "Base Event");
    b.num("ocsf.category_uid", 0);
    b.str("ocsf.category_name", "Uncategorized");
    b.num("ocsf.activity_id", 99);
    b.str("ocsf.activity_name", "Records Not Exported");
    b.num("ocsf.type_uid", 99);
    b.num("ocsf.severity_id", 4);
    b.str("ocsf.severity", "High");
    b.num("ocsf.status_id", 2);
    b.str("ocsf.status", "Failure");
    b.str("ocsf.metadata.version", kOcsfVersion);
    b.num("bulwark.gap.count", int64_t(count));
    b.str("bulwark.gap.reason", why);
    return lr;
}

}  // namespace bulwark::telemetry
