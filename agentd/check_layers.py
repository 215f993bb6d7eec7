#!/usr/bin/env python3
"""agentd's dependency rule (agentd/README.md), checked: every file of a
subsystem folder includes other agentd headers only by their folder
("sandbox/cgroup.h", never "cgroup.h") and only from the folders the rule
allows it. Exit 1 with one line per breach (file:line: what, and the rule).

    check_layers.py AGENTD_DIR
"""
import os
import re
import sys

# folder -> the folders it may include (besides itself)
ALLOWED = {
    "common": set(),
    "audit": {"common"},
    "sandbox": {"common"},
    "bpf": {"common", "audit"},
    "kaudit": {"common", "audit"},
    "vm": {"common", "audit", "sandbox"},
    "profiles": {"common", "audit"},
    "tasks": {"common", "audit", "sandbox", "bpf", "kaudit", "vm", "profiles"},
    "api": {"common", "audit", "tasks", "profiles"},
    "mcp": {"common", "api"},
    "telemetry": {"common", "audit"},
    "cli": {"common", "audit", "sandbox", "bpf", "kaudit", "vm", "tasks", "api", "mcp", "telemetry", "profiles"},
    "guest": {"common", "audit", "sandbox", "bpf", "kaudit", "vm", "tasks"},
    "oci": {"common", "sandbox", "tasks", "mcp"},
}
# Narrower than the folder: what bpf/ and kaudit/ may take of audit/, and
# mcp/ of api/ (the HTTP transport for --http).
ONLY = {
    ("bpf", "audit"): {"audit/audit_record.h", "audit/run_context.h"},
    ("kaudit", "audit"): {"audit/audit_record.h", "audit/run_context.h"},
    ("mcp", "api"): {"api/http_server.h", "api/http_api.h", "api/http_parse.h"},
    ("guest", "tasks"): {"tasks/run_binding.h"},
    ("guest", "vm"): {"vm/channel.h"},
    ("oci", "tasks"): {"tasks/grant_json.h", "tasks/tool_catalog.h"},
    ("oci", "mcp"): {"mcp/agentd_client.h"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def main() -> int:
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(__file__))
    folders = {d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d))}
    unknown = folders - set(ALLOWED)
    breaches = [f"{root}/{d}: a folder the dependency rule does not know (add it to check_layers.py "
                f"and agentd/README.md)" for d in sorted(unknown)]
    headers = {}  # basename -> folder, to name the folder a bare include meant
    for d in folders:
        for f in os.listdir(os.path.join(root, d)):
            if f.endswith(".h"):
                headers[f] = d
    for d in sorted(folders & set(ALLOWED)):
        for f in sorted(os.listdir(os.path.join(root, d))):
            if not f.endswith((".cpp", ".h", ".in")):
                continue
            path = os.path.join(root, d, f)
            with open(path, encoding="utf-8") as fh:
                for n, line in enumerate(fh, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    inc = m.group(1)
                    where = f"agentd/{d}/{f}:{n}"
                    if "/" not in inc:
                        if inc in headers:
                            breaches.append(f'{where}: #include "{inc}" must name its folder: '
                                            f'"{headers[inc]}/{inc}"')
                        continue
                    target = inc.split("/", 1)[0]
                    if target not in ALLOWED:
                        continue  # bulwark/policy/..., generated skeletons, third parties
                    if target == d:
                        continue
                    if target not in ALLOWED[d]:
                        may = ", ".join(sorted(ALLOWED[d])) or "no other folder"
                        breaches.append(f'{where}: #include "{inc}": {d}/ may include {may}')
                    elif (d, target) in ONLY and inc not in ONLY[(d, target)]:
                        breaches.append(f'{where}: #include "{inc}": {d}/ may take only '
                                        f'{", ".join(sorted(ONLY[(d, target)]))} of {target}/')
    main_cpp = os.path.join(root, "main.cpp")
    if os.path.exists(main_cpp):
        with open(main_cpp, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                m = INCLUDE.match(line)
                if m and "/" not in m.group(1) and m.group(1) in headers:
                    breaches.append(f'agentd/main.cpp:{n}: #include "{m.group(1)}" must name its folder')
    for b in breaches:
        print(b)
    if breaches:
        print(f"agentd_layers: {len(breaches)} breach(es) of the dependency rule (agentd/README.md)")
        return 1
    print(f"agentd_layers: {len(folders)} folders, every include within the dependency rule")
    return 0


if __name__ == "__main__":
    sys.exit(main())
