#pragma once
// API v1 routes for the tools' behaviour profiles (docs/profiles.md):
//   GET  /v1/profiles                      every profile kept, in short
//   GET  /v1/profiles/{tool}               one, with what it learned (?task=ID: a task's own)
//   GET  /v1/profiles/{tool}/rules         it as a rule file: the narrowest rules within the tool's
//   POST /v1/profiles/{tool}/reset         learned part emptied: the window starts again
//   POST /v1/profiles/{tool}/pin           learns nothing more until unpinned
//   POST /v1/profiles/{tool}/unpin
//   POST /v1/profiles/{tool}/accept        {"finding_seq": N}: that run learned as usual
// Findings themselves are audit records (GET /v1/audit?kind=finding).
#include "api/http_api.h"

namespace bulwark {
class ToolCatalog;
}
namespace bulwark::profiles {
class ProfileBook;
}

namespace bulwark::http {

// `catalog`: the served rules (a profile exported as a rule file is cut from
// its tool's).
void register_profile_routes(Router& r, profiles::ProfileBook* book, const ToolCatalog* catalog);

}  // namespace bulwark::http
