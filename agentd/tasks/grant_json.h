#pragma once
// The JSON form of a task grant (API v1, agentd/api/openapi.json "Grant"):
//
//   {"files":[{"path":"${workdir}/out","rights":["read","write","create","remove","exec"]}],
//    "network":"none" | [{"host":"api.github.com","ports":"443","proto":["tcp"],"ops":["connect"]},
//                        {"cidr":"10.0.0.0/8","ports":"80-443"}],
//    "families":["inet","inet6","unix"],
//    "limits":{"timeout_ms":..,"memory_bytes":..,"pids":..,"output_bytes":..,"cpu_percent":..}}
//
// Every part is optional and confines only what it names (grants.h). Paths
// may use the task's variables (${workdir}, ${home}, ${tmp}, ${task_id}).
// Unknown keys, wrong types and bad values are errors naming the field
// ("grant.files[1].rights[0]: unknown right 'wrte'"), never ignored.
#include <expected>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "bulwark/policy/grants.h"
#include "bulwark/policy/instantiate.h"

namespace bulwark {

std::expected<policy::Grant, std::string> grant_from_json(const nlohmann::json& j, const policy::TaskVars& vars,
                                                          std::string_view where = "grant");

// "read|write" -> BW_FS_* names as a JSON array.
nlohmann::json rights_json(uint32_t rights);

}  // namespace bulwark
