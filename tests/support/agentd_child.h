#pragma once
// The real agentd binary as a child process of a test: its output goes to a
// file, and it is killed (SIGKILL) if the test did not wait for it.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace bulwark::test {

struct AgentdChild {
    pid_t pid = -1;
    std::string out_path;
    AgentdChild(std::vector<std::string> args, const std::string& out) : out_path(out) {
        pid = fork();
        if (pid == 0) {
            FILE* f = std::fopen(out.c_str(), "w");
            dup2(fileno(f), 1);
            dup2(fileno(f), 2);
            std::vector<char*> av;
            for (auto& a : args) av.push_back(a.data());
            av.push_back(nullptr);
            execv(AGENTD_BINARY, av.data());
            _exit(127);
        }
    }
    AgentdChild(const AgentdChild&) = delete;
    AgentdChild& operator=(const AgentdChild&) = delete;
    int wait_exit() {
        int ws = 0;
        waitpid(pid, &ws, 0);
        pid = -1;
        return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
    }
    std::string output() const {
        std::ifstream f(out_path);
        return std::string(std::istreambuf_iterator<char>(f), {});
    }
    ~AgentdChild() {
        if (pid > 0) {
            kill(pid, SIGKILL);
            waitpid(pid, nullptr, 0);
        }
    }
};

}  // namespace bulwark::test
