#!/usr/bin/env python3
"""check_tiers: no test tier includes or compiles another tier's files.

What tiers share lives in tests/support/. This fails (exit 1, one line per
breach, file:line) when a tier's source includes a header of another tier's
folder (not its own, not in tests/support/), or when a tier's CMakeLists.txt
names a file under another tier's folder, or when any CMakeLists.txt of the
repository registers a test with a bare add_test() instead of
bulwark_add_test() (which gates skips in CI, cmake/BulwarkTest.cmake).

    check_tiers.py TESTS_DIR
"""
import os
import re
import sys


def main() -> int:
    tests = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(__file__))
    support = os.path.join(tests, "support")
    tiers = sorted(d for d in os.listdir(tests)
                   if os.path.isdir(os.path.join(tests, d)) and d != "support")
    # Which tiers hold a header of this name (a product header found through
    # the include path, e.g. vmlinux.h or a BPF helper, is no tier's).
    holders: dict[str, list[str]] = {}
    for tier in tiers:
        for dirpath, _, files in os.walk(os.path.join(tests, tier)):
            for name in files:
                if name.endswith(".h"):
                    holders.setdefault(name, []).append(tier)
    breaches = []
    for tier in tiers:
        root = os.path.join(tests, tier)
        for dirpath, _, files in os.walk(root):
            for name in files:
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, os.path.dirname(tests))
                if name.endswith((".cpp", ".h", ".c")):
                    with open(path, errors="replace") as f:
                        for n, line in enumerate(f, 1):
                            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                            if not m or "/" in m.group(1) or m.group(1).endswith(".skel.h"):
                                continue
                            h = m.group(1)
                            if os.path.exists(os.path.join(dirpath, h)) or os.path.exists(os.path.join(support, h)):
                                continue
                            others = [t for t in holders.get(h, []) if t != tier]
                            if others:
                                breaches.append(f"{rel}:{n}: includes \"{h}\" of the {', '.join(others)} tier; "
                                                "share it through tests/support/")
                elif name == "CMakeLists.txt":
                    with open(path) as f:
                        for n, line in enumerate(f, 1):
                            for other in re.findall(r"\$\{CMAKE_SOURCE_DIR\}/tests/([A-Za-z0-9_.-]+)/", line):
                                if other not in (tier, "support"):
                                    breaches.append(f"{rel}:{n}: names a file of the {other} tier; share it through tests/support/")
    repo = os.path.dirname(tests)
    for dirpath, dirs, files in os.walk(repo):
        dirs[:] = [d for d in dirs if d not in ("node_modules", ".git") and not d.startswith("build")]
        if "CMakeLists.txt" not in files:
            continue
        path = os.path.join(dirpath, "CMakeLists.txt")
        with open(path) as f:
            for n, line in enumerate(f, 1):
                if re.search(r"(?<![A-Za-z0-9_])add_test\s*\(", line.split("#", 1)[0]):
                    breaches.append(f"{os.path.relpath(path, repo)}:{n}: a bare add_test(); use bulwark_add_test() "
                                    "so that a skip fails in CI unless tests/not-runnable.txt lists it")
    for b in breaches:
        print(b)
    if breaches:
        return 1
    print(f"check_tiers: {len(tiers)} tiers, each includes only its own files and tests/support/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
