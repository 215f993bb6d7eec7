#include "bulwark/policy/rule_writer.h"

#include <algorithm>
#include <sstream>
#include <string_view>
#include <utility>

#include <yaml-cpp/yaml.h>

namespace bulwark::policy {
namespace {

// "files.read" -> {"files", "read"}
std::pair<std::string_view, std::string_view> key_of(DraftSection s) {
    switch (s) {
    case DraftSection::FilesRead: return {"files", "read"};
    case DraftSection::FilesWrite: return {"files", "write"};
    case DraftSection::FilesCreate: return {"files", "create"};
    case DraftSection::FilesRemove: return {"files", "remove"};
    case DraftSection::ExecAllow: return {"exec", "allow"};
    case DraftSection::NetworkConnect: return {"network", "connect"};
    case DraftSection::NetworkBind: return {"network", "bind"};
    case DraftSection::NetworkSend: return {"network", "send"};
    case DraftSection::NetworkUnixConnect: return {"network", "unix.connect"};
    case DraftSection::NetworkUnixSend: return {"network", "unix.send"};
    case DraftSection::NetworkUnixBind: return {"network", "unix.bind"};
    case DraftSection::SyscallsAllow: return {"syscalls", "allow"};
    case DraftSection::SyscallsArchitectures: return {"syscalls", "architectures"};
    }
    return {"?", "?"};
}

}  // namespace

RuleFileWriter::RuleFileWriter(std::string tool, std::string extends, std::string comment)
    : tool_(std::move(tool)), extends_(std::move(extends)), comment_(std::move(comment)) {}

void RuleFileWriter::add(DraftSection section, Entry e) {
    auto it = std::find_if(sections_.begin(), sections_.end(), [&](const auto& s) { return s.first == section; });
    if (it == sections_.end()) it = sections_.insert(sections_.end(), {section, {}});
    if (std::find(it->second.begin(), it->second.end(), e) == it->second.end()) it->second.push_back(std::move(e));
}

void RuleFileWriter::add_path(DraftSection section, std::string path, std::string comment) {
    add(section, Entry{std::move(path), {}, true, std::move(comment)});
}

void RuleFileWriter::add_name(DraftSection section, std::string name, std::string comment) {
    add(section, Entry{std::move(name), {}, false, std::move(comment)});
}

void RuleFileWriter::add_net(DraftSection section, DraftNetRule rule, std::string comment) {
    add(section, Entry{{}, std::move(rule), false, std::move(comment)});
}

bool RuleFileWriter::empty() const { return sections_.empty(); }

bool RuleFileWriter::has(DraftSection section, std::string_view value) const {
    for (const auto& [s, entries] : sections_)
        if (s == section)
            return std::any_of(entries.begin(), entries.end(), [&](const Entry& e) { return e.value == value; });
    return false;
}

size_t RuleFileWriter::size() const {
    size_t n = 0;
    for (const auto& [section, entries] : sections_) n += entries.size();
    return n;
}

std::string RuleFileWriter::text() const {
    YAML::Emitter out;
    out.SetIndent(2);
    out << YAML::BeginMap;
    out << YAML::Key << "tool" << YAML::Value << tool_;
    if (!extends_.empty()) out << YAML::Key << "extends" << YAML::Value << extends_;
    // Blocks in the order their first section was added; each block's
    // sections in theirs.
    std::vector<std::string_view> blocks;
    for (const auto& [section, entries] : sections_)
        if (std::find(blocks.begin(), blocks.end(), key_of(section).first) == blocks.end())
            blocks.push_back(key_of(section).first);
    for (auto block : blocks) {
        out << YAML::Key << std::string(block) << YAML::Value << YAML::BeginMap;
        // "unix.connect" and its kin: keys of one nested "unix" mapping, after the others
        bool nested = false;
        for (bool unix_keys : {false, true})
        for (const auto& [section, entries] : sections_) {
            if (key_of(section).first != block) continue;
            std::string_view key = key_of(section).second;
            if (key.starts_with("unix.") != unix_keys) continue;
            if (unix_keys) {
                if (!nested) out << YAML::Key << "unix" << YAML::Value << YAML::BeginMap;
                nested = true;
                key.remove_prefix(5);
            }
            out << YAML::Key << std::string(key) << YAML::Value << YAML::BeginSeq;
            for (const auto& e : entries) {
                if (!e.net.cidr.empty()) {
                    out << YAML::Flow << YAML::BeginMap;
                    out << YAML::Key << "cidr" << YAML::Value << YAML::DoubleQuoted << e.net.cidr;
                    out << YAML::Key << "ports" << YAML::Value << YAML::Flow << YAML::BeginSeq << e.net.port
                        << YAML::EndSeq;
                    out << YAML::Key << "proto" << YAML::Value << e.net.proto;
                    out << YAML::EndMap;
                } else if (e.quoted) {
                    out << YAML::DoubleQuoted << e.value;
                } else {
                    out << e.value;
                }
                if (!e.comment.empty()) out << YAML::Comment(e.comment);
            }
            out << YAML::EndSeq;
        }
        if (nested) out << YAML::EndMap;
        out << YAML::EndMap;
    }
    out << YAML::EndMap;
    std::string text;
    std::istringstream lines(comment_);
    for (std::string line; std::getline(lines, line);) text += "# " + line + "\n";
    return text + out.c_str() + "\n";
}

}  // namespace bulwark::policy
