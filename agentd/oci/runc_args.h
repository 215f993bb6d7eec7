#pragma once
// runc's command line as containerd's runc shim (go-runc) and podman's conmon
// write it: global options, the command, its options, its arguments. Go's
// flag package rules: -x or --x, a value as the next word or after '=', the
// options end at the first word that is not one (or at "--").
#include <optional>
#include <string>
#include <vector>

namespace bulwark::oci {

struct Option {
    std::string name;                  // without dashes: "bundle", "b"
    std::optional<std::string> value;  // a value option's value
    bool inline_value = false;         // written "--name=value"
};

struct RuncArgs {
    std::vector<Option> global;
    std::string command;  // "" when none was given
    std::vector<Option> options;
    std::vector<std::string> args;  // the container id first, then (exec) the command
    bool dashdash = false;          // "--" before args

    // The value of the command option written as any of `names`.
    std::optional<std::string> option(std::initializer_list<const char*> names) const;
    bool flag(std::initializer_list<const char*> names) const;
    std::optional<std::string> global_option(const char* name) const;
    // Sets (or adds) a command option's value.
    void set_option(std::initializer_list<const char*> names, const std::string& value);
    void remove_option(std::initializer_list<const char*> names);
    // argv for the delegate: argv[0] = delegate, then everything as parsed.
    std::vector<std::string> argv(const std::string& delegate) const;
};

// The options of runc 1.1 that take a value (global and per command).
RuncArgs parse_runc_args(const std::vector<std::string>& words);

}  // namespace bulwark::oci
