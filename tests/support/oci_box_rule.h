#pragma once
// The rule file of the OCI runtime's unit tests and its fuzz target: busybox
// over its work directory, a deny mask below it, a syscall deny, every limit
// a container spec can carry.
namespace bulwark::test {

inline constexpr const char* kOciBoxRule = R"(tool: box
binaries: [/bin/busybox]
files:
  read: ["${workdir}", /bin]
  write: ["${workdir}"]
  create: ["${workdir}"]
  deny:
    - { path: "${workdir}/.git", rights: [write, create, remove] }
exec:
  allow: [/bin/busybox]
syscalls:
  deny: [ptrace]
limits:
  memory: 64MiB
  pids: 8
  open_files: 128
  file_size: 1MiB
  cpu: 50%
)";

}  // namespace bulwark::test
