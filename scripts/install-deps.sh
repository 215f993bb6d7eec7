#!/usr/bin/env bash
# Installs the Debian 12 packages Bulwark builds, runs and tests with.
# Idempotent: apt-get runs only when something is missing.
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential cmake ninja-build pkg-config clang llvm
  # libFuzzer's runtime for the fuzz tiers (tests/fuzz; GCC's own runtimes of
  # ASan, UBSan and TSan come with gcc)
  libclang-rt-14-dev
  # libraries (see README "Dependencies")
  libbpf-dev bpftool libboost-dev libsqlite3-dev sqlite3 nlohmann-json3-dev catch2
  libseccomp-dev libyaml-cpp-dev libcli11-dev libspdlog-dev libfmt-dev libcap-dev
  libelf-dev zlib1g-dev libssl-dev
  # real-kernel VM tests of the BPF LSM programs (tests/vm)
  qemu-system-x86 busybox-static cpio zstd
  # arm64 hardening tier: cross toolchain + qemu-user (tests/hardening-arm64)
  gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-user
  # peers measured side by side (tests/bench)
  bubblewrap hyperfine
  # container engines of the OCI runtime tier (tests/oci): runc and crun as
  # delegates, podman (--runtime), containerd 1.6 with ctr (its config parser
  # also checks the Kubernetes runtime handler, tests/kubernetes)
  runc crun podman containerd
  # process tools used by tests
  procps iproute2 util-linux
  # tools nobody shipped rules for, written from nothing (tests/authoring)
  perl xz-utils
  # tools the shipped rules and the main job run (curl, python3 for the client and its demo)
  curl python3
  # the dashboard page (built with npm) and its real-browser tier (tests/dashboard)
  nodejs chromium
)
# The arm64 core tiers (tests/hardening-arm64): the arm64 builds of the
# libraries the policy library and agentd's core link, installed beside the
# amd64 ones through Debian's multiarch (dpkg --add-architecture arm64, below).
# Each is Multi-Arch: same, so apt keeps both architectures at one version
# (it may upgrade the amd64 package to the arm64 one's version; it never
# removes one). libyaml-cpp-dev is not (its arm64 and amd64 packages exclude
# each other): the arm64 runtime library with the amd64 package's
# arch-independent headers (the top-level CMakeLists.txt). Only when the
# arm64 core build is asked for (BULWARK_ARM64=1, off by default).
if [[ ${BULWARK_ARM64:-0} == 1 ]]; then
  PACKAGES+=(
    libseccomp-dev:arm64 libssl-dev:arm64 libsqlite3-dev:arm64 libspdlog-dev:arm64 libfmt-dev:arm64
    libyaml-cpp0.7:arm64
  )
fi
# Debian's npm package, unless npm is already there (a nodejs build that bundles
# npm conflicts with it)
command -v npm >/dev/null 2>&1 || PACKAGES+=(npm)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

# MCP tier (tests/mcp): node runs the official MCP SDK as the client. Any
# node with npm will do (NodeSource's nodejs carries npm and conflicts with
# Debian's npm package), so the commands are checked, not the packages.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if [[ ${BULWARK_ARM64:-0} == 1 ]] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
    dpkg --add-architecture arm64
  fi
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all ${#PACKAGES[@]} packages present"
fi
