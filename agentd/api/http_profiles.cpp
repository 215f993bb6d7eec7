#include "api/http_profiles.h"

#include "api/http_tasks.h"
#include "common/json_input.h"
#include "profiles/profile_book.h"
#include "tasks/learning.h"

namespace bulwark::http {
namespace {

using nlohmann::json;
using profiles::ProfileError;

ApiResponse answer(const std::expected<json, ProfileError>& r) {
    if (r) return json_response(200, *r);
    switch (r.error().code) {
    case ProfileError::Code::UnknownTool:
    case ProfileError::Code::UnknownTask: return error_response(404, "unknown_profile", r.error().message);
    case ProfileError::Code::UnknownFinding: return error_response(404, "unknown_finding", r.error().message);
    case ProfileError::Code::Pinned: return error_response(409, "profile_pinned", r.error().message);
    case ProfileError::Code::Accepted: return error_response(409, "finding_accepted", r.error().message);
    case ProfileError::Code::Store: break;
    }
    return error_response(500, "query_failed", r.error().message);
}

// {"finding_seq": N}, nothing else.
std::expected<uint64_t, std::string> finding_seq_of(const std::string& body) {
    auto j = parse_peer_json(body);
    if (!j) return std::unexpected("the body " + j.error());
    if (!j->is_object()) return std::unexpected("the body must be a JSON object");
    for (auto it = j->begin(); it != j->end(); ++it)
        if (it.key() != "finding_seq") return std::unexpected("unknown key '" + it.key() + "'");
    auto seq = j->find("finding_seq");
    if (seq == j->end() || !seq->is_number_unsigned() || seq->get<uint64_t>() == 0)
        return std::unexpected("finding_seq: required, the seq of a finding record");
    return seq->get<uint64_t>();
}

// ?task=N (nothing else): a task's own profile of the tool (task_learn)
// instead of the tool's.
std::expected<std::optional<uint64_t>, ApiResponse> task_of(const ApiRequest& req) {
    std::optional<uint64_t> task;
    for (const auto& [k, v] : req.query) {
        if (k != "task") return std::unexpected(error_response(400, "bad_parameter", "unknown query parameter '" + k + "'"));
        task = positive_integer(v);
        if (!task)
            return std::unexpected(error_response(400, "bad_parameter", "task '" + v + "' is not a positive integer"));
    }
    return task;
}

// A route on one profile: the tool's, or with ?task=N that task's own.
template <class F>
Router::Handler on_profile(F f) {
    return [f](const ApiRequest& req) {
        auto task = task_of(req);
        return task ? f(req, req.params.at("tool"), *task) : task.error();
    };
}

}  // namespace

void register_profile_routes(Router& r, profiles::ProfileBook* book, const ToolCatalog* catalog) {
    r.add("GET", "/v1/profiles", [book](const ApiRequest&) { return json_response(200, book->list()); });
    r.add("GET", "/v1/profiles/{tool}", on_profile([book](const ApiRequest&, const std::string& tool, auto task) {
              return answer(book->get(tool, task));
          }));
    r.add(
        "GET", "/v1/profiles/{tool}/rules",
        on_profile([book, catalog](const ApiRequest&, const std::string& tool, auto task) {
            auto p = book->copy(tool, task);
            if (!p) return answer(std::unexpected(p.error()));
            auto out = profile_rule_file(*catalog, tool, p->profile, p->version);
            return out ? json_response(200, *out) : task_error_response(out.error());
        }),
        {.offload = true});
    r.add("POST", "/v1/profiles/{tool}/reset", on_profile([book](const ApiRequest&, const std::string& tool, auto task) {
              return answer(book->reset(tool, task));
          }));
    r.add("POST", "/v1/profiles/{tool}/pin", on_profile([book](const ApiRequest&, const std::string& tool, auto task) {
              return answer(book->pin(tool, true, task));
          }));
    r.add("POST", "/v1/profiles/{tool}/unpin", on_profile([book](const ApiRequest&, const std::string& tool, auto task) {
              return answer(book->pin(tool, false, task));
          }));
    r.add(
        "POST", "/v1/profiles/{tool}/accept",
        on_profile([book](const ApiRequest& req, const std::string& tool, auto task) {
            auto seq = finding_seq_of(req.body);
            if (!seq) return error_response(400, "bad_request", seq.error());
            return answer(book->accept(tool, *seq, task));
        }),
        {.offload = true});
}

}  // namespace bulwark::http
