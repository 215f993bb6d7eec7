"""Where this process sits on the host, for the Python tiers and benchmarks
that start agentd with a cgroup parent and pin root of their own."""


def cgroup2_mount() -> str:
    """The cgroup v2 mount point, from /proc/self/mountinfo."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            sep = parts.index("-")
            if parts[sep + 1] == "cgroup2":
                return parts[4]
    raise SystemExit("no cgroup2 mount")


def own_cgroup() -> str:
    """This process's cgroup v2 path ("/" when it has none)."""
    with open("/proc/self/cgroup") as f:
        for line in f:
            if line.startswith("0::"):
                return line[3:].strip()
    return "/"
