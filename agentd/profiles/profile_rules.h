#pragma once
// A profile exported as a rule file: the narrowest rules, within the tool's
// own, that cover what its learned runs did (GET /v1/profiles/{tool}/rules).
//
// The tool's file is taken with its `extends` chain merged in
// (policy::flatten_rule_file) and written back as one file
// (policy::rule_file_text) with its allow lists cut to what the profile saw:
//   files.read/write/create/remove/exec, exec.allow
//            an entry no learned file area (or executed binary) reaches is
//            dropped; one reached only below it is narrowed to those areas
//            (binaries, for exec); one an area reaches at or above it is
//            kept as written (an area is at most three directories deep,
//            or a task variable: the profile knows no finer);
//   network.connect/bind/send
//            an address rule is narrowed to the addresses, ports and
//            protocols the learned runs reached under it, or dropped; a host
//            name rule (resolved per task) is kept while the runs reached
//            any destination with that operation;
//   network.dns, network.unix
//            a resolver or socket no learned run reached is dropped; a unix
//            directory rule (`/dir/`) is narrowed to the sockets reached.
// Every deny, the binaries, system calls, limits, hardening, environment and
// the profile block are the tool's own, unchanged: a profile counts the calls
// a run made, not the arguments its rules judge. Each entry kept or narrowed
// carries the learned runs that used it as a comment; `entries` says what
// happened to every allow entry of the tool, by rule.
#include <string>

#include <nlohmann/json.hpp>

#include "bulwark/policy/bundle.h"
#include "bulwark/policy/rule_file_text.h"
#include "profiles/profile.h"

namespace bulwark::profiles {

struct ProfileRules {
    std::string text;  // the rule file
    // [{rule: "file:line:col", text, section, result: kept|narrowed|dropped,
    //   to: [values] (narrowed), runs: learned runs that used it}]
    nlohmann::json entries = nlohmann::json::array();
    // {kept, narrowed, dropped}: how many entries came to each
    nlohmann::json counts() const;
};

// `flat`: the tool's rule file flattened; `compiled`: the same file compiled
// (its rule ids are the tree's).
ProfileRules profile_rules(const Profile& profile, policy::FlatRuleFile flat, const policy::Bundle& compiled);

}  // namespace bulwark::profiles
