// agentd/api/http_tasks.cpp: the one table from a task error's code to the
// HTTP status and body clients see (the Python client raises by status:
// NotFound, Conflict, Unprocessable, ServiceUnavailable, ...).
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "api/http_tasks.h"

using namespace bulwark;
using nlohmann::json;

namespace {

constexpr TaskErrc kAll[] = {
    TaskErrc::BadRequest,     TaskErrc::BadGrant,     TaskErrc::BadWorkdir,          TaskErrc::FileRefused,
    TaskErrc::GrantWidens,    TaskErrc::InstantiateFailed, TaskErrc::CandidateInvalid, TaskErrc::UnknownTask,    TaskErrc::UnknownTool,
    TaskErrc::TaskClosed,     TaskErrc::WorkdirGone,  TaskErrc::TooManyTasks,        TaskErrc::RuleUnenforced,
    TaskErrc::BpfUnavailable, TaskErrc::StoreRefusing, TaskErrc::StoreUnacknowledged, TaskErrc::NoStore,
    TaskErrc::ShuttingDown,   TaskErrc::WorkdirFailed, TaskErrc::QueryFailed,        TaskErrc::Internal,
};

}  // namespace

TEST_CASE("every task error code has a name of its own and an error status") {
    std::set<std::string> names;
    for (TaskErrc c : kAll) {
        std::string name(code_name(c));
        INFO(name);
        CHECK(names.insert(name).second);
        CHECK(name.find_first_not_of("abcdefghijklmnopqrstuvwxyz_") == std::string::npos);
        int status = http::http_status(c);
        CHECK(status >= 400);
        CHECK(status < 600);
    }
    CHECK(names.size() == std::size(kAll));
}

TEST_CASE("the statuses clients act on") {
    CHECK(http::http_status(TaskErrc::BadRequest) == 400);
    CHECK(http::http_status(TaskErrc::GrantWidens) == 403);
    CHECK(http::http_status(TaskErrc::UnknownTask) == 404);
    CHECK(http::http_status(TaskErrc::TaskClosed) == 409);
    CHECK(http::http_status(TaskErrc::WorkdirGone) == 409);
    CHECK(http::http_status(TaskErrc::FileRefused) == 422);
    CHECK(http::http_status(TaskErrc::RuleUnenforced) == 422);
    CHECK(http::http_status(TaskErrc::CandidateInvalid) == 422);
    CHECK(http::http_status(TaskErrc::TooManyTasks) == 429);
    CHECK(http::http_status(TaskErrc::Internal) == 500);
    // Not now, maybe later: the same request may succeed.
    for (TaskErrc c : {TaskErrc::BpfUnavailable, TaskErrc::StoreRefusing, TaskErrc::StoreUnacknowledged,
                       TaskErrc::ShuttingDown})
        CHECK(http::http_status(c) == 503);
}

TEST_CASE("an error's facts sit beside its code and message") {
    auto resp = http::task_error_response(
        TaskError{TaskErrc::RuleUnenforced, "1 rule(s) of cat would go unenforced", {{"run_id", 9}, {"tool", "cat"}}});
    CHECK(resp.status == 422);
    CHECK(resp.content_type == "application/json");
    CHECK(json::parse(resp.body) == json{{"error",
                                          {{"code", "rule_unenforced"},
                                           {"message", "1 rule(s) of cat would go unenforced"},
                                           {"run_id", 9},
                                           {"tool", "cat"}}}});
}
