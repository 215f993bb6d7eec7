#pragma once
// What one run did, as a tool's profile learns and scores it: the sets of
// things it touched (binaries it executed, destinations it reached, file
// areas it read or wrote, system calls refused to it) and the run's sizes
// (time, CPU, memory, output, processes, denials, files opened, bytes sent).
//
// The same extraction serves a live run (each decision record as the store
// takes it, then the exit report) and a recorded one (its records read back
// from the store), so a profile rebuilt after a restart is the one the live
// runs built.
//
// Normalisation, so that a profile generalises across tasks and arguments:
// paths under the task's work directory, home and temporary directory are
// written with the rule language's variables (${workdir}/...; a relative name
// is taken under the work directory, where the tool starts; "." components
// folded), and a file area is an operation on a directory prefix: at most
// kAreaDepth components below the root, or the variable itself below a task
// directory (whose names are the task's data, not the tool's behaviour),
// e.g. "read /usr/lib/python3.11" or "write ${workdir}".
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "audit/audit_record.h"
#include "bulwark/policy/instantiate.h"

namespace bulwark::profiles {

// The set features, in the order findings and profiles list them.
inline constexpr std::string_view kExec = "exec";                // binaries executed
inline constexpr std::string_view kDestination = "destination";  // network and unix peers
inline constexpr std::string_view kFileArea = "file_area";       // "<read|write|exec> <dir prefix>"
inline constexpr std::string_view kSecret = "secret";            // credential-like files opened
inline constexpr std::string_view kSyscall = "syscall";          // system calls made (monitor) or refused
// The exec item of the tool's own launch (the sandbox execs its verified
// binary through a descriptor).
inline constexpr std::string_view kLaunch = "(the tool's binary)";
inline constexpr std::string_view kSetFeatures[] = {kExec, kDestination, kFileArea, kSecret, kSyscall};

// The number features: name, unit, the least departure from the usual that
// can be a finding (below it a run is never unusual, however steady the tool
// was: a 3 ms tool taking 9 ms is not worth a finding), and whether it comes
// from the monitor's counts (absent from a run nothing counted).
struct NumberFeature {
    std::string_view name;
    std::string_view unit;
    double floor;
    bool counted = false;
};
inline constexpr NumberFeature kNumberFeatures[] = {
    {"wall_ms", "ms", 1000},
    {"cpu_ms", "ms", 500},
    {"memory_mib", "MiB", 64},
    {"output_kib", "KiB", 256},
    {"processes", "processes", 8},
    {"denials", "denials", 3},
    {"decisions", "decisions", 200},
    {"file_opens", "opens", 200, true},
    {"sent_kib", "KiB", 256, true},
};

inline constexpr size_t kAreaDepth = 3;


struct RunFeatures {
    std::map<std::string, std::set<std::string>, std::less<>> sets;  // feature -> items
    std::map<std::string, double, std::less<>> numbers;             // feature -> value

    // One decision record of the run (any layer, any decision). Returns the
    // set items it added that the run had not had before.
    std::vector<std::pair<std::string_view, std::string>> add(const audit::AuditRecord& r,
                                                              const policy::TaskVars& vars);
    // The run's exit figures, from its exit record's detail (audit_record's
    // run_exit detail: wall_us, cpu_user_us, cpu_system_us,
    // peak_memory_bytes, output_bytes, denials, and `counted`: what the
    // monitor counted, RunReport::counted).
    void add_exit(const nlohmann::json& exit_detail);

    // {feature: [items] | value}; from_json is its inverse (a finding record's
    // features, learned when the finding is accepted). Throws
    // nlohmann::json::exception on a malformed document.
    nlohmann::json to_json() const;
    static RunFeatures from_json(const nlohmann::json& j);

private:
    std::string exec_item(std::string_view path, const policy::TaskVars& vars);
    bool launched_ = false;  // the tool's own exec (its launch) was seen
};

// `path` is `dir` or lies below it (by components; "/" holds everything).
bool path_under(std::string_view path, std::string_view dir);
// `path` written with the task's directory variables (workdir, home, tmp)
// where it lies under one, the longest directory first.
std::string with_vars(std::string_view path, const policy::TaskVars& vars);
// The directory prefix a file belongs to: at most kAreaDepth components, or
// the task variable it lies under.
std::string area_of(std::string_view path);
// A file whose name says it holds a credential (keys, tokens, .env, ...).
bool credential_like(std::string_view path);

}  // namespace bulwark::profiles
