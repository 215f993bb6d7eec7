#include "bulwark/policy/rule_writer.h"

#include <algorithm>
#include <sstream>
#include <utility>

#include "bulwark/policy/rule_file_text.h"

namespace bulwark::policy {

RuleFileWriter::RuleFileWriter(std::string tool, std::string extends, std::string comment)
    : comment_(std::move(comment)) {
    file_.tool = scalar(std::move(tool), 0);
    if (!extends.empty()) file_.extends.push_back(scalar(std::move(extends), 0));
}

uint32_t RuleFileWriter::next_rule(std::string comment) {
    ++rules_;
    if (!comment.empty()) comments_[rules_] = std::move(comment);
    return rules_;
}

ast::Scalar RuleFileWriter::scalar(std::string value, uint32_t rule_id) const {
    ast::Scalar s;
    s.value = std::move(value);
    s.rule_id = rule_id;
    return s;
}

void RuleFileWriter::add_path(DraftSection section, std::string path, std::string comment) {
    if (has(section, path)) return;
    seen_[section].push_back(path);
    const uint32_t id = next_rule(std::move(comment));
    auto& net = file_.network;
    std::vector<ast::Scalar>* unix = section == DraftSection::NetworkUnixConnect ? &net.unix_connect
                                     : section == DraftSection::NetworkUnixSend  ? &net.unix_send
                                     : section == DraftSection::NetworkUnixBind  ? &net.unix_bind
                                                                                 : nullptr;
    if (unix) {
        net.present = net.mapping = true;
        unix->push_back(scalar(std::move(path), id));
        return;
    }
    ast::PathItem item;
    item.path = scalar(std::move(path), id);
    item.rule_id = id;
    if (section == DraftSection::ExecAllow) {
        file_.exec.present = true;
        file_.exec.allow.push_back(std::move(item));
        return;
    }
    auto& f = file_.files;
    f.present = true;
    (section == DraftSection::FilesWrite    ? f.write
     : section == DraftSection::FilesCreate ? f.create
     : section == DraftSection::FilesRemove ? f.remove
                                            : f.read)
        .push_back(std::move(item));
}

void RuleFileWriter::add_name(DraftSection section, std::string name, std::string comment) {
    if (has(section, name)) return;
    seen_[section].push_back(name);
    const uint32_t id = next_rule(std::move(comment));
    auto& s = file_.syscalls;
    s.present = true;
    if (section == DraftSection::SyscallsArchitectures) {
        s.has_architectures = true;
        s.architectures.push_back(scalar(std::move(name), id));
        return;
    }
    ast::SyscallItem item;
    item.name = scalar(std::move(name), id);
    item.rule_id = id;
    s.allow.push_back(std::move(item));
}

void RuleFileWriter::add_net(DraftSection section, DraftNetRule rule, std::string comment) {
    const std::string key = rule.cidr + " " + std::to_string(rule.port) + " " + rule.proto;
    if (has(section, key)) return;
    seen_[section].push_back(key);
    const uint32_t id = next_rule(std::move(comment));
    ast::NetItem item;
    item.cidr = scalar(std::move(rule.cidr), 0);
    item.ports.push_back(scalar(std::to_string(rule.port), 0));
    item.proto = scalar(std::move(rule.proto), 0);
    item.rule_id = id;
    auto& net = file_.network;
    net.present = net.mapping = true;
    (section == DraftSection::NetworkBind ? net.bind : section == DraftSection::NetworkSend ? net.send : net.connect)
        .push_back(std::move(item));
}

bool RuleFileWriter::empty() const { return rules_ == 0; }

bool RuleFileWriter::has(DraftSection section, std::string_view value) const {
    auto it = seen_.find(section);
    return it != seen_.end() && std::find(it->second.begin(), it->second.end(), value) != it->second.end();
}

size_t RuleFileWriter::size() const { return rules_; }

std::string RuleFileWriter::text() const {
    std::string text;
    std::istringstream lines(comment_);
    for (std::string line; std::getline(lines, line);) text += "# " + line + "\n";
    return text + rule_file_text(file_, comments_);
}

}  // namespace bulwark::policy
