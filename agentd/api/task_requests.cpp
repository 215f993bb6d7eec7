#include "api/task_requests.h"

#include <string>

namespace bulwark::http {

using nlohmann::json;

std::expected<ExecRequest, TaskError> parse_exec(const json& body) {
    auto bad = [](std::string m) { return std::unexpected(TaskError{TaskErrc::BadRequest, std::move(m)}); };
    if (!body.is_object()) return bad("the body must be a JSON object");
    ExecRequest r;
    for (auto it = body.begin(); it != body.end(); ++it)
        if (it.key() != "tool" && it.key() != "argv" && it.key() != "stdin" && it.key() != "timeout_ms" &&
            it.key() != "files" && it.key() != "client_ref")
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
    if (body.contains("files")) {
        auto f = parse_workdir_files(body["files"]);
        if (!f) return std::unexpected(TaskError{TaskErrc::FileRefused, f.error()});
        r.files = std::move(*f);
    }
    return r;
}

std::expected<RecordRange, TaskError> parse_record_range(const json& body, std::initializer_list<const char*> extra) {
    auto bad = [](std::string m) { return std::unexpected(TaskError{TaskErrc::BadRequest, std::move(m)}); };
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

}  // namespace bulwark::http
