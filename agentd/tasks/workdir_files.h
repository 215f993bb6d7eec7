#pragma once
// Working files an exec request carries (`files: {relative_path: content}`),
// written into the task's work directory before the run. The directory
// belongs to the sandboxed tools, so anything in it may have been planted
// by an earlier run: every path is resolved with openat2(RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS) from a descriptor of the
// work directory, intermediate directories are created one component at a
// time the same way, and only a regular file with one link is replaced.
#include <cstddef>
#include <expected>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace bulwark {

struct WorkdirFile {
    std::string path;     // relative, checked by parse_workdir_files
    std::string content;
};

struct WorkdirFileLimits {
    size_t max_files = 64;
    size_t max_file_bytes = 1024 * 1024;
    size_t max_total_bytes = 4 * 1024 * 1024;
    size_t max_path_bytes = 1024;
    size_t max_depth = 16;  // path components
};

// An error names the field: "files.<path>: <why>" (or "files: <why>").
std::expected<std::vector<WorkdirFile>, std::string> parse_workdir_files(const nlohmann::json& files,
                                                                         const WorkdirFileLimits& limits = {});

// Writes each file (mode 0644, owned like the work directory, parents 0755)
// and returns [{"path","bytes"}] for the run's record. Stops at the first
// refusal; files written before it stay.
std::expected<nlohmann::json, std::string> write_workdir_files(const std::string& workdir,
                                                               const std::vector<WorkdirFile>& files);

}  // namespace bulwark
