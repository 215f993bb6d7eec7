#pragma once
// Why the task manager did not do what it was asked: a code callers switch
// on, a sentence for people, and the facts a client can act on (ids, the
// rules no layer held). The API maps each code to its HTTP status in one
// table (api/http_tasks.cpp); the code's name is the stable `error.code` of
// its replies.
#include <cstdint>
#include <expected>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace bulwark {

enum class TaskErrc : uint8_t {
    // The request
    BadRequest,         // malformed or out of range
    BadGrant,           // a grant that does not parse
    BadWorkdir,         // a work directory that may not be used
    FileRefused,        // a working file that may not be written
    GrantWidens,        // a grant asking more than the tool's rules allow
    InstantiateFailed,  // a tool's rules do not instantiate for this task
    CandidateInvalid,   // a candidate rule file that does not compile for the tool
    // What it names
    UnknownTask,
    UnknownTool,
    UnknownContainer,
    UnknownProfile,   // a tool no profile is kept for
    UnknownFinding,
    NotNarrowed,      // a tool of the task its profile has not narrowed
    ContainerExists,  // a container id already bound
    TaskClosed,
    WorkdirGone,  // the task's work directory is gone from the host
    TooManyTasks,
    // The run could not be carried out as written, or not now
    RuleUnenforced,       // a rule no layer in force here holds
    BpfUnavailable,       // the BPF layer could not take the run now
    StoreRefusing,        // the audit store refuses new runs (disk full, ...)
    StoreUnacknowledged,  // the run's start record was not taken or not committed
    ProfileHold,          // the tool's profile found a run unusual; its runs wait for a grant update
    NoStore,
    ShuttingDown,
    // agentd itself
    WorkdirFailed,
    QueryFailed,
    Internal,
};

// The code's stable name: "unknown_task", "rule_unenforced", ...
std::string_view code_name(TaskErrc code);

struct TaskError {
    TaskErrc code = TaskErrc::Internal;
    std::string message;
    nlohmann::json extra = nlohmann::json::object();  // facts beside the message
};

inline std::unexpected<TaskError> task_error(TaskErrc code, std::string message,
                                             nlohmann::json extra = nlohmann::json::object()) {
    return std::unexpected(TaskError{code, std::move(message), std::move(extra)});
}

}  // namespace bulwark
