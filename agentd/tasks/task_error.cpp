#include "tasks/task_error.h"

namespace bulwark {

std::string_view code_name(TaskErrc code) {
    switch (code) {
    case TaskErrc::BadRequest: return "bad_request";
    case TaskErrc::BadGrant: return "bad_grant";
    case TaskErrc::BadWorkdir: return "bad_workdir";
    case TaskErrc::FileRefused: return "file_refused";
    case TaskErrc::GrantWidens: return "grant_widens";
    case TaskErrc::InstantiateFailed: return "instantiate_failed";
    case TaskErrc::CandidateInvalid: return "candidate_invalid";
    case TaskErrc::UnknownTask: return "unknown_task";
    case TaskErrc::UnknownContainer: return "unknown_container";
    case TaskErrc::UnknownProfile: return "unknown_profile";
    case TaskErrc::UnknownFinding: return "unknown_finding";
    case TaskErrc::NotNarrowed: return "not_narrowed";
    case TaskErrc::ProfileHold: return "profile_hold";
    case TaskErrc::ContainerExists: return "container_exists";
    case TaskErrc::UnknownTool: return "unknown_tool";
    case TaskErrc::TaskClosed: return "task_closed";
    case TaskErrc::WorkdirGone: return "workdir_gone";
    case TaskErrc::TooManyTasks: return "too_many_tasks";
    case TaskErrc::RuleUnenforced: return "rule_unenforced";
    case TaskErrc::BpfUnavailable: return "bpf_unavailable";
    case TaskErrc::StoreRefusing: return "store_refusing";
    case TaskErrc::StoreUnacknowledged: return "store_unacknowledged";
    case TaskErrc::NoStore: return "no_store";
    case TaskErrc::ShuttingDown: return "shutting_down";
    case TaskErrc::WorkdirFailed: return "workdir_failed";
    case TaskErrc::QueryFailed: return "query_failed";
    case TaskErrc::Internal: return "internal";
    }
    return "internal";
}

}  // namespace bulwark
