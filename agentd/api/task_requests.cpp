#include "api/task_requests.h"

#include <chrono>
#include <string>

#include "common/trace_context.h"

namespace bulwark::http {

using nlohmann::json;

namespace {

std::unexpected<TaskError> bad(std::string m) { return task_error(TaskErrc::BadRequest, std::move(m)); }

}  // namespace

std::expected<ExecRequest, TaskError> parse_exec(const json& body, std::optional<std::string_view> traceparent_header) {
    if (!body.is_object()) return bad("the body must be a JSON object");
    ExecRequest r;
    for (auto it = body.begin(); it != body.end(); ++it)
        if (it.key() != "tool" && it.key() != "argv" && it.key() != "stdin" && it.key() != "timeout_ms" &&
            it.key() != "files" && it.key() != "client_ref" && it.key() != "traceparent")
            return bad("unknown key '" + it.key() + "'");
    if (!body.contains("tool") || !body["tool"].is_string()) return bad("tool: a tool name is required");
    r.tool = body["tool"].get<std::string>();
    if (!body.contains("argv") || !body["argv"].is_array() || body["argv"].empty())
        return bad("argv: a non-empty array of strings is required");
    if (body["argv"].size() > 4096) return bad("argv: at most 4096 arguments");
    size_t total = 0;
    for (size_t i = 0; i < body["argv"].size(); ++i) {
        const auto& a = body["argv"][i];
        if (!a.is_string()) return bad("argv[" + std::to_string(i) + "]: must be a string");
        const auto& s = a.get_ref<const std::string&>();
        if (s.find('\0') != std::string::npos) return bad("argv[" + std::to_string(i) + "]: contains NUL");
        total += s.size() + 1;
        r.argv.push_back(s);
    }
    if (total > 256 * 1024) return bad("argv: more than 256 KiB in all");
    if (body.contains("stdin")) {
        if (!body["stdin"].is_string()) return bad("stdin: must be a string");
        r.stdin_data = body["stdin"].get<std::string>();
    }
    if (body.contains("timeout_ms")) {
        const auto& v = body["timeout_ms"];
        if (!v.is_number_unsigned() || v.get<uint64_t>() == 0) return bad("timeout_ms: must be a positive integer");
        r.timeout_ms = v.get<uint64_t>();
    }
    if (body.contains("client_ref")) {
        const auto& v = body["client_ref"];
        if (!v.is_string() || v.get_ref<const std::string&>().empty() || v.get_ref<const std::string&>().size() > 128)
            return bad("client_ref: must be a string of 1 to 128 bytes");
        r.client_ref = v.get<std::string>();
    }
    if (traceparent_header) {
        auto t = parse_traceparent(*traceparent_header);
        if (!t) return bad("traceparent (header): " + t.error());
        r.traceparent = t->text;
    }
    if (body.contains("traceparent")) {
        const auto& v = body["traceparent"];
        if (!v.is_string()) return bad("traceparent: must be a string (a W3C traceparent)");
        auto t = parse_traceparent(v.get_ref<const std::string&>());
        if (!t) return bad("traceparent: " + t.error());
        if (r.traceparent && *r.traceparent != t->text)
            return bad("traceparent: the body's differs from the traceparent header");
        r.traceparent = t->text;
    }
    if (body.contains("files")) {
        auto f = parse_workdir_files(body["files"]);
        if (!f) return std::unexpected(TaskError{TaskErrc::FileRefused, f.error()});
        r.files = std::move(*f);
    }
    return r;
}

std::expected<RecordRange, TaskError> parse_record_range(const json& body, std::initializer_list<const char*> extra) {
    if (!body.is_object()) return bad("the body must be a JSON object");
    for (auto it = body.begin(); it != body.end(); ++it) {
        bool known = it.key() == "tool" || it.key() == "since_ns" || it.key() == "until_ns" || it.key() == "task" ||
                     it.key() == "max_records";
        for (const char* k : extra) known = known || it.key() == k;
        if (!known) return bad("unknown key '" + it.key() + "'");
    }
    if (!body.contains("tool") || !body["tool"].is_string()) return bad("tool: required");
    for (const char* k : {"since_ns", "until_ns", "task", "max_records"})
        if (body.contains(k) && !body[k].is_number_unsigned()) return bad(std::string(k) + ": must be a non-negative integer");
    RecordRange r;
    r.tool = body["tool"].get<std::string>();
    if (body.contains("since_ns")) r.since_ns = body["since_ns"].get<int64_t>();
    if (body.contains("until_ns")) r.until_ns = body["until_ns"].get<int64_t>();
    if (body.contains("task")) r.task_id = body["task"].get<uint64_t>();
    r.max_records = body.value("max_records", uint64_t(100000));
    return r;
}

std::expected<CreateTaskRequest, TaskError> parse_create_task(const json& body) {
    if (!body.is_object()) return bad("the body must be a JSON object");
    for (auto it = body.begin(); it != body.end(); ++it)
        if (it.key() != "tools" && it.key() != "workdir" && it.key() != "label" && it.key() != "grant" &&
            it.key() != "skip_unavailable")
            return bad("unknown key '" + it.key() + "'");
    CreateTaskRequest r;
    if (body.contains("skip_unavailable")) {
        if (!body["skip_unavailable"].is_boolean()) return bad("skip_unavailable: must be a boolean");
        r.skip_unavailable = body["skip_unavailable"].get<bool>();
    }
    if (!body.contains("tools") || !body["tools"].is_array() || body["tools"].empty())
        return bad("tools: a non-empty array of tool names is required");
    for (size_t i = 0; i < body["tools"].size(); ++i) {
        const auto& n = body["tools"][i];
        if (!n.is_string()) return bad("tools[" + std::to_string(i) + "]: must be a string");
        r.tools.push_back(n.get<std::string>());
    }
    if (body.contains("label")) {
        if (!body["label"].is_string() || body["label"].get_ref<const std::string&>().size() > 256)
            return bad("label: must be a string of at most 256 bytes");
        r.label = body["label"].get<std::string>();
    }
    if (body.contains("workdir")) {
        if (!body["workdir"].is_string()) return bad("workdir: must be a string");
        r.workdir = body["workdir"].get<std::string>();
    }
    r.grant = body.value("grant", json(nullptr));
    return r;
}

std::expected<GrantUpdate, TaskError> parse_grant_update(const json& body) {
    if (!body.is_object()) return bad("the body must be a JSON object");
    for (auto it = body.begin(); it != body.end(); ++it)
        if (it.key() != "grant" && it.key() != "expires_in_ms") return bad("unknown key '" + it.key() + "'");
    if (!body.contains("grant")) return bad("grant: required (null for the tools' rules as they are)");
    GrantUpdate u;
    u.grant = body["grant"];
    if (body.contains("expires_in_ms")) {
        const auto& v = body["expires_in_ms"];
        if (!v.is_number_unsigned() || v.get<uint64_t>() == 0 || v.get<uint64_t>() > 7ull * 24 * 3600 * 1000)
            return bad("expires_in_ms: must be 1..604800000");
        u.expires_in = std::chrono::milliseconds(v.get<uint64_t>());
    }
    return u;
}

std::expected<std::string, TaskError> parse_cancel(const json& body) {
    if (!body.is_object() || body.size() != 1 || !body.contains("client_ref") || !body["client_ref"].is_string())
        return bad("the body must be {\"client_ref\": \"<the exec's client_ref>\"}");
    return body["client_ref"].get<std::string>();
}

}  // namespace bulwark::http
