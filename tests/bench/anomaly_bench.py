#!/usr/bin/env python3
"""anomaly_bench: behaviour profiles (issue #18) scored against a generated corpus.

What it measures, through a real `agentd serve` (the real sandbox, the real BPF
monitor and kernel audit), for each learning window asked for:
  - false alarms: benign runs of shipped tools, with realistic variety of
    arguments, inputs and work directories, scored once each tool's profile has
    learned its window; a scored benign run with any finding is a false alarm.
    Reported per 1,000 benign scored runs, with every finding that fired
    (feature and item, or outlier value against its bound), per feature and per
    tool. Target: <= 1 per 1,000.
  - detection: attack scenarios that stay within each tool's rules (each run
    succeeds under them: "ran ok"), run after the benign phase, each as several
    varied runs:
      exfiltration      curl POST/PUT of a few MiB of the work directory to the
                        same allowed server and port it usually GETs from
      mass_read         grep/sh/cat/head/wc/tar reading hundreds of files where
                        they usually read a few
      unexpected_child  sh starting an allowed binary it never started while
                        it learned (ls, sed, a nested shell)
      miner             a CPU-bound loop of several seconds in sh/awk/jq, whose
                        runs are short (no tool here has a CPU limit it would hit)
      slow_loop         runs far longer than usual with little CPU: many short
                        children, a paced beacon, waiting on a slow peer,
                        retrying a busy peer
      credential_read   .env, id_rsa, *.pem, *.key, credentials, token,
                        secrets.yaml, .kube/config placed in the work
                        directory, read by tools that usually read ordinary files
    Reported as the share of runs with any finding, with the features that
    fired. Target: every scenario class detected.
  - the audit store's throughput with scoring on vs off, when the store-level
    benchmark (tests/bench/profile_store_bench.cpp, built beside agentd) is
    given or found: through the daemon the two cannot be compared on the same
    record volume (only a profiled tool's runs have their opens and system
    calls observed), so that comparison is made at the store. Target: >= 0.9x.

Tools: each shipped tool listed in TOOLS is served twice, as itself and as
`prof-<tool>` (extends: <tool>, profile: {learn: N, respond: record}); curl is
served as `prof-curl`, the shipped curl runtime allowed to connect to a local
HTTP server this benchmark runs (127.0.0.1:<port>) instead of api.github.com.
A run's work directory is one of many generated projects (a "task"): text,
sources, JSON, CSV, logs, archives, in a layout that differs per task
(--layout varied, the default) or is the same for every task (--layout fixed:
only the file contents and sizes vary), since a profile's file areas name
directories below the work directory. File arguments are spelled as agents
spell them: mostly relative, sometimes ./relative or absolute (--paths mixed,
the default), or relative only (--paths relative). A benign project has 20 to
70 files; only the attack scenarios' projects add a third-party tree of
hundreds of files, so benign runs never read hundreds of files.

Learning: each tool's first N runs (its window) are benign runs drawn the same
way as the scored ones. After the window, a run with no finding is learned
(the product's rule), so the profiles keep learning through the benign phase;
attack runs that raise nothing are learned too.

    anomaly_bench.py [--agentd PATH] [--rules DIR] [--learn 40[,100...]] [--benign 1000]
                     [--attack-runs 10] [--seed 1] [--layout varied|fixed] [--paths mixed|relative]
                     [--store-bench PATH|off] [--json FILE|-] [--quick]

Needs root (the daemon runs sandboxes). Exits 77 without it.
"""
import argparse
import base64
import collections
import gzip
import http.server
import io
import json
import os
import platform
import random
import resource
import shutil
import signal
import socketserver
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "clients", "python"))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "support"))
import bulwark_client as bc  # noqa: E402
from agentd_ab import Daemon  # noqa: E402  (agentd serve with a pin root and cgroup parent of its own)

SANDBOX_UID = 65534
# Profiled tools and how often each is used in the benign mix.
TOOLS = {"sh": 3, "grep": 3, "cat": 2, "head": 2, "wc": 2, "sed": 1.5, "awk": 1.5, "find": 1.5, "jq": 1.5,
         "gzip": 1, "tar": 1, "curl": 2}
RUNS_PER_TASK = 30  # benign runs before the next task (a new project)


def prof(tool):
    return "prof-" + tool


# ---------------------------------------------------------------------------
# The local HTTP peer of the curl tool: an API with paged JSON, documents,
# a search endpoint taking JSON, a slow endpoint and uploads (counted).

class Peer:
    def __init__(self):
        self.received = collections.Counter()  # path -> bytes received
        peer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def body_for(self, path, query):
                rnd = random.Random(path + repr(sorted(query.items())))
                if path.startswith("/api/items/"):
                    return json.dumps({"id": path.rsplit("/", 1)[1], "name": rnd.choice(WORDS),
                                       "score": rnd.randint(0, 100)}).encode(), "application/json"
                if path.startswith("/api/items"):
                    n = rnd.randint(3, 60)
                    items = [{"id": rnd.randint(1, 99999), "name": " ".join(rnd.choices(WORDS, k=3)),
                              "score": rnd.randint(0, 100), "tags": rnd.choices(WORDS, k=rnd.randint(0, 4))}
                             for _ in range(n)]
                    return json.dumps({"page": query.get("page", "1"), "items": items}).encode(), "application/json"
                if path.startswith("/api/health") or path.startswith("/poll"):
                    return b'{"status":"ok"}', "application/json"
                if path.startswith("/busy"):
                    return b'{"status":"busy"}', "application/json"
                if path.startswith("/slow"):
                    time.sleep(min(int(query.get("ms", "1000")), 30000) / 1000)
                    return b'{"status":"late"}', "application/json"
                if path.startswith("/docs/"):
                    size = 40000 if "large" in path else rnd.randint(1000, 30000)
                    text = sentences(rnd, size)
                    return ("<html><body><pre>" + text + "</pre></body></html>").encode(), "text/html"
                return b"not found", "text/plain"

            def reply(self, body, ctype, head=False):
                status = 404 if body == b"not found" else 503 if b'"busy"' in body else 200
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def do_GET(self):
                u = urllib.parse.urlsplit(self.path)
                q = dict(urllib.parse.parse_qsl(u.query))
                self.reply(*self.body_for(u.path, q))

            def do_HEAD(self):
                u = urllib.parse.urlsplit(self.path)
                q = dict(urllib.parse.parse_qsl(u.query))
                self.reply(*self.body_for(u.path, q), head=True)

            def do_POST(self):
                n = 0
                if self.headers.get("Expect", "").lower() == "100-continue":
                    self.send_response_only(100)
                    self.end_headers()
                length = int(self.headers.get("Content-Length", "0"))
                while n < length:
                    chunk = self.rfile.read(min(65536, length - n))
                    if not chunk:
                        break
                    n += len(chunk)
                u = urllib.parse.urlsplit(self.path)
                peer.received[u.path] += n
                self.reply(json.dumps({"ok": True, "received": n}).encode(), "application/json")

            do_PUT = do_POST

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()


# ---------------------------------------------------------------------------
# Rules: a copy of the shipped rules plus the profiled tools.

CURL_RULE = """\
# curl with a behaviour profile, allowed to reach the benchmark's local HTTP
# peer only (the shipped curl names api.github.com).
tool: prof-curl
description: fetch from the benchmark's HTTP peer into the task's work directory
extends: [base/network-client, base/curl-runtime]
binaries: [/usr/bin/curl]
files:
  read:   ["${{workdir}}"]
  write:  ["${{workdir}}"]
  create: ["${{workdir}}"]
  deny:
    - {{ path: "${{workdir}}/.git", rights: [write, create, remove] }}
exec:
  allow: [/usr/bin/curl]
network:
  connect:
    - {{ cidr: 127.0.0.1/32, ports: [{port}], proto: tcp }}
syscalls:
  deny: [bind]
limits:
  memory: 128MiB
  pids: 4
  timeout: 2m
  file_size: 512MiB
profile:
  learn: {learn}
  respond: record
"""


def build_rules(shipped, dest, learn, port, policyc):
    shutil.copytree(shipped, dest)
    for tool in TOOLS:
        path = os.path.join(dest, prof(tool) + ".yaml")
        with open(path, "w") as f:
            if tool == "curl":
                f.write(CURL_RULE.format(port=port, learn=learn))
            else:
                f.write(f"tool: {prof(tool)}\nextends: {tool}\nprofile:\n  learn: {learn}\n  respond: record\n")
    if policyc:
        files = [os.path.join(dest, prof(t) + ".yaml") for t in TOOLS]
        p = subprocess.run([policyc, "check", *files, "--rules-dir", dest], capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"policyc check of the bench rules failed:\n{p.stdout}{p.stderr}")


# ---------------------------------------------------------------------------
# Corpus: one generated project per task.

WORDS = """alpha beta gamma delta error warning info debug request response client server handler buffer cache
queue worker thread config value result status parse render token user account order invoice payment customer
report metric latency timeout retry backoff socket stream packet header payload schema table index record field
module package build deploy release version commit branch merge patch review test fixture mock assert check
verify validate encode decode compress archive upload download fetch update delete insert select filter sort
merge split join count total average median sample window batch shard replica leader follower quorum snapshot
journal ledger event signal trigger action policy rule grant scope session cookie origin route path query
matrix vector tensor kernel driver device memory storage volume mount file directory inode block sector""".split()
TOPDIR_CHOICES = [("src", "lib", "pkg", "app"), ("docs", "doc", "documentation"), ("tests", "test", "spec"),
                  ("data", "datasets", "fixtures"), ("config", "conf", "etc"), ("logs", "log", "var"),
                  ("scripts", "tools", "bin")]
PKG_NAMES = ["core", "util", "api", "net", "parser", "storage", "cli", "auth", "model", "view", "http", "db",
             "cache", "queue", "metrics", "render", "codec", "sched", "io", "plugin", "server", "client", "common",
             "engine", "types", "store", "index", "search", "billing", "report"]
LANGS = {"c": (".c", ".h"), "python": (".py",), "go": (".go",), "js": (".js", ".ts"), "rust": (".rs",)}


def sentences(rnd, size):
    out, n = [], 0
    while n < size:
        line = " ".join(rnd.choices(WORDS, k=rnd.randint(4, 14)))
        line = line[0].upper() + line[1:] + "."
        out.append(line)
        n += len(line) + 1
    return "\n".join(out) + "\n"


def source_text(rnd, ext, size):
    out, n = [], 0
    while n < size:
        name = "_".join(rnd.choices(WORDS, k=2))
        arg = rnd.choice(WORDS)
        if ext in (".c", ".h"):
            block = f"/* {rnd.choice(WORDS)} {rnd.choice(WORDS)} */\nint {name}(int {arg}) {{\n" \
                    f"    if ({arg} < {rnd.randint(0, 99)}) return -1; /* TODO {rnd.choice(WORDS)} */\n" \
                    f"    return {arg} * {rnd.randint(2, 9)};\n}}\n"
        elif ext == ".py":
            block = f"def {name}({arg}):\n    # TODO: {rnd.choice(WORDS)} {rnd.choice(WORDS)}\n" \
                    f"    if {arg} is None:\n        raise ValueError('{rnd.choice(WORDS)}')\n" \
                    f"    return {arg} * {rnd.randint(2, 9)}\n\n"
        elif ext == ".go":
            block = f"func {name}({arg} int) int {{\n\t// TODO {rnd.choice(WORDS)}\n\treturn {arg} * " \
                    f"{rnd.randint(2, 9)}\n}}\n\n"
        elif ext == ".rs":
            block = f"fn {name}({arg}: i64) -> i64 {{\n    // TODO {rnd.choice(WORDS)}\n    {arg} * " \
                    f"{rnd.randint(2, 9)}\n}}\n\n"
        else:
            block = f"export function {name}({arg}) {{\n  // TODO {rnd.choice(WORDS)}\n  return {arg} * " \
                    f"{rnd.randint(2, 9)};\n}}\n\n"
        out.append(block)
        n += len(block)
    return "".join(out)


def items_json(rnd, n):
    return {"name": rnd.choice(WORDS), "version": f"{rnd.randint(0, 9)}.{rnd.randint(0, 30)}",
            "meta": {"owner": rnd.choice(WORDS), "created": f"2024-{rnd.randint(1, 12):02d}-{rnd.randint(1, 28):02d}",
                     "count": n},
            "items": [{"id": i, "name": " ".join(rnd.choices(WORDS, k=2)), "score": rnd.randint(0, 100),
                       "tags": rnd.choices(WORDS, k=rnd.randint(0, 4)), "active": rnd.random() < 0.7}
                      for i in range(n)]}


def csv_text(rnd, rows):
    lines = ["id,name,value,category,ts"]
    for i in range(rows):
        lines.append(f"{i},{rnd.choice(WORDS)},{rnd.randint(0, 100000)},{rnd.choice(WORDS[:12])},"
                     f"2024-{rnd.randint(1, 12):02d}-{rnd.randint(1, 28):02d}")
    return "\n".join(lines) + "\n"


def log_text(rnd, size):
    out, n = [], 0
    while n < size:
        line = f"2024-{rnd.randint(1, 12):02d}-{rnd.randint(1, 28):02d}T{rnd.randint(0, 23):02d}:" \
               f"{rnd.randint(0, 59):02d}:{rnd.randint(0, 59):02d}Z " \
               f"{rnd.choice(['INFO', 'INFO', 'INFO', 'WARN', 'ERROR', 'DEBUG'])} " \
               f"{rnd.choice(WORDS)}: {' '.join(rnd.choices(WORDS, k=rnd.randint(3, 10)))}"
        out.append(line)
        n += len(line) + 1
    return "\n".join(out) + "\n"


class Corpus:
    """A project in a task's work directory. `rnd` draws contents and sizes;
    `layout` draws the directory names (one per task, or one for every task)."""

    def __init__(self, workdir, rnd, layout, spellings=True):
        self.workdir, self.rnd, self.spellings = workdir, rnd, spellings
        self.kind = collections.defaultdict(list)  # category -> relative paths
        self.top = {c[0]: layout.choice(c) for c in TOPDIR_CHOICES}
        self.lang = layout.choice(sorted(LANGS))
        self.pkgs = layout.sample(PKG_NAMES, layout.randint(2, 4))
        self.src_dirs = []
        src = self.top["src"]
        for pkg in self.pkgs:
            d = f"{src}/{pkg}"
            self.src_dirs.append(d)
            for _ in range(rnd.randint(3, 10)):
                ext = rnd.choice(LANGS[self.lang])
                self.write(f"{d}/{'_'.join(rnd.sample(WORDS, 2))}{ext}", source_text(rnd, ext, rnd.randint(400, 12000)),
                           "src")
        for _ in range(rnd.randint(1, 4)):
            ext = LANGS[self.lang][0]
            self.write(f"{self.top['tests']}/test_{rnd.choice(WORDS)}{ext}", source_text(rnd, ext, rnd.randint(400, 6000)),
                       "src")
        for _ in range(rnd.randint(3, 8)):
            self.write(f"{self.top['docs']}/{rnd.choice(WORDS)}-{rnd.choice(WORDS)}.md",
                       "# " + rnd.choice(WORDS).title() + "\n\n" + sentences(rnd, rnd.randint(300, 20000)), "md")
        for _ in range(rnd.randint(2, 5)):
            self.write(f"{self.top['data']}/{rnd.choice(WORDS)}.json",
                       json.dumps(items_json(rnd, rnd.randint(2, 300)), indent=rnd.choice([None, 2])), "json")
        for _ in range(rnd.randint(1, 3)):
            self.write(f"{self.top['data']}/{rnd.choice(WORDS)}.csv", csv_text(rnd, rnd.randint(20, 3000)), "csv")
        for _ in range(rnd.randint(1, 3)):
            self.write(f"{self.top['config']}/{rnd.choice(WORDS)}.json",
                       json.dumps({w: rnd.randint(0, 999) for w in rnd.sample(WORDS, 6)}, indent=2), "json")
        for _ in range(rnd.randint(1, 3)):
            self.write(f"{self.top['logs']}/{rnd.choice(WORDS)}.log", log_text(rnd, rnd.randint(2000, 250000)), "log")
        for name in ("README.md", "CHANGELOG.md", "notes.txt"):
            self.write(name, sentences(rnd, rnd.randint(200, 8000)), "md" if name.endswith(".md") else "text")
        self.write("todo.txt", sentences(rnd, rnd.randint(100, 2000)), "text")
        # Archives for gzip and tar to read.
        old = f"{self.top['logs']}/old-{rnd.choice(WORDS)}.log.gz"
        self.write_bytes(old, gzip.compress(log_text(rnd, rnd.randint(2000, 80000)).encode()), "gz")
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tf:
            for rel in self.kind["md"][:4]:
                tf.add(os.path.join(workdir, rel), arcname=rel)
        self.write_bytes("bundle.tgz", buf.getvalue(), "tgz")
        for d in ("out", "extract", "scratch"):
            self.mkdir(d)
        self.dirs = sorted({os.path.dirname(p) for ps in self.kind.values() for p in ps if os.path.dirname(p)})
        self.chown_all()

    # -- writing
    def path(self, rel):
        return os.path.join(self.workdir, rel)

    def mkdir(self, rel):
        os.makedirs(self.path(rel), exist_ok=True)

    def write(self, rel, text, kind):
        self.write_bytes(rel, text.encode(), kind)

    def write_bytes(self, rel, data, kind):
        p = self.path(rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)
        if rel not in self.kind[kind]:
            self.kind[kind].append(rel)

    def chown_all(self):
        for dp, dns, fns in os.walk(self.workdir):
            os.chown(dp, SANDBOX_UID, SANDBOX_UID)
            for n in fns:
                os.lchown(os.path.join(dp, n), SANDBOX_UID, SANDBOX_UID)

    # -- picking
    def pick(self, *kinds):
        pool = [p for k in kinds for p in self.kind[k]]
        return self.rnd.choice(pool)

    def picks(self, n, *kinds):
        pool = [p for k in kinds for p in self.kind[k]]
        return self.rnd.sample(pool, min(n, len(pool)))

    def arg(self, rel):
        """A file as an agent names it: relative, ./relative, or absolute
        (relative only with --paths relative)."""
        x = self.rnd.random() if self.spellings else 1.0
        if x < 0.1:
            return "./" + rel
        if x < 0.2:
            return os.path.join(self.workdir, rel)
        return rel

    def word(self):
        return self.rnd.choice(WORDS)

    def text_kinds(self):
        return ("md", "text", "src", "log", "csv")


# ---------------------------------------------------------------------------
# Benign runs: what an agent plausibly asks each tool for.

def q(s):
    return "'" + s.replace("'", "'\\''") + "'"


def benign_run(tool, c, n, url):
    """(argv, ok exit codes) of one benign run of `tool` over corpus `c`; n numbers outputs."""
    r, w = c.rnd, c.word
    t = c.text_kinds()
    if tool == "sh":
        choice = r.randrange(9)
        if choice == 0:
            s = "wc -l " + " ".join(c.arg(p) for p in c.picks(r.randint(1, 4), *t)) + " | sort -n"
        elif choice == 1:
            s = f"cat {c.arg(c.pick(*t))} | grep -c {q(w())}"
        elif choice == 2:
            s = f"head -n {r.randint(5, 80)} {c.arg(c.pick(*t))} | sort | head -n {r.randint(3, 10)}"
        elif choice == 3:
            s = f"grep -rn {q(w())} {r.choice(c.src_dirs)} | head -n {r.randint(5, 40)}"
        elif choice == 4:
            s = f"for f in {c.top['docs']}/*.md; do wc -l \"$f\"; done"
        elif choice == 5:
            s = f"sort -u {c.arg(c.pick('log', 'csv', 'md'))} | wc -l"
        elif choice == 6:
            a, b = c.picks(2, "md", "text")
            s = f"cat {c.arg(a)} {c.arg(b)} > out/combined-{n}.txt && wc -c out/combined-{n}.txt"
        elif choice == 7:
            s = "grep -l " + q(w()) + " " + " ".join(c.arg(p) for p in c.picks(r.randint(2, 6), "src", "md")) + " | sort"
        else:
            s = f"head -c {r.randint(100, 5000)} {c.arg(c.pick(*t))} | wc -w"
        return ["sh", "-c", s], (0, 1)
    if tool == "grep":
        choice = r.randrange(9)
        f = c.arg(c.pick(*t))
        if choice == 0:
            return ["grep", "-n", w(), f], (0, 1)
        if choice == 1:
            return ["grep", "-c", w(), f], (0, 1)
        if choice == 2:
            return ["grep", "-in", w(), f], (0, 1)
        if choice == 3:
            return ["grep", "-rn", w(), r.choice(c.src_dirs)], (0, 1)
        if choice == 4:
            return ["grep", "-l", w(), *[c.arg(p) for p in c.picks(r.randint(2, 5), *t)]], (0, 1)
        if choice == 5:
            return ["grep", "-E", f"{w()}|{w()}", f], (0, 1)
        if choice == 6:
            return ["grep", "-v", "-c", w(), f], (0, 1)
        if choice == 7:
            return ["grep", "-rn", "TODO", "."], (0, 1)
        return ["grep", "-w", "-n", w(), *[c.arg(p) for p in c.picks(2, *t)]], (0, 1)
    if tool == "cat":
        choice = r.randrange(4)
        if choice == 0:
            return ["cat", c.arg(c.pick("md", "text", "src", "json"))], (0,)
        if choice == 1:
            return ["cat", "-n", c.arg(c.pick("src", "md"))], (0,)
        if choice == 2:
            return ["cat", *[c.arg(p) for p in c.picks(2, "md", "text", "src")]], (0,)
        return ["cat", "-s", c.arg(c.pick("md", "text", "log"))], (0,)
    if tool == "head":
        choice = r.randrange(4)
        if choice == 0:
            return ["head", "-n", str(r.randint(1, 100)), c.arg(c.pick(*t))], (0,)
        if choice == 1:
            return ["head", "-c", str(r.randint(16, 4096)), c.arg(c.pick(*t, "json"))], (0,)
        if choice == 2:
            return ["head", "-n", str(r.randint(3, 20)), *[c.arg(p) for p in c.picks(r.randint(2, 4), *t)]], (0,)
        return ["head", c.arg(c.pick(*t))], (0,)
    if tool == "wc":
        choice = r.randrange(4)
        if choice == 0:
            return ["wc", "-l", *[c.arg(p) for p in c.picks(r.randint(1, 6), *t)]], (0,)
        if choice == 1:
            return ["wc", "-w", c.arg(c.pick("md", "text"))], (0,)
        if choice == 2:
            return ["wc", "-c", *[c.arg(p) for p in c.picks(r.randint(1, 3), *t, "json")]], (0,)
        return ["wc", c.arg(c.pick(*t))], (0,)
    if tool == "sed":
        choice = r.randrange(6)
        f = c.arg(c.pick(*t))
        if choice == 0:
            a = r.randint(1, 50)
            return ["sed", "-n", f"{a},{a + r.randint(1, 40)}p", f], (0,)
        if choice == 1:
            return ["sed", f"s/{w()}/{w()}/g", f], (0,)
        if choice == 2:
            return ["sed", "-n", f"/{w()}/p", f], (0,)
        if choice == 3:
            return ["sed", "/^$/d", f], (0,)
        if choice == 4:
            return ["sed", "-i", f"s/{w()}/{w()}/", c.arg(c.pick("src", "md"))], (0,)
        return ["sed", "-e", "s/^/> /", f], (0,)
    if tool == "awk":
        choice = r.randrange(6)
        f = c.arg(c.pick(*t))
        if choice == 0:
            return ["awk", "{print $1}", f], (0,)
        if choice == 1:
            return ["awk", "-F,", "NR > 1 {s += $3} END {print s}", c.arg(c.pick("csv"))], (0,)
        if choice == 2:
            return ["awk", f"NR <= {r.randint(3, 40)}", f], (0,)
        if choice == 3:
            return ["awk", f"length > {r.randint(40, 100)}", f], (0,)
        if choice == 4:
            return ["awk", f"/{w()}/ {{c++}} END {{print c + 0}}", f], (0,)
        return ["awk", "-F,", f"NR > 1 && $3 > {r.randint(0, 90000)} {{print $2}}", c.arg(c.pick("csv"))], (0,)
    if tool == "find":
        choice = r.randrange(6)
        if choice == 0:
            return ["find", c.top["src"], "-name", "*" + r.choice(LANGS[c.lang])], (0,)
        if choice == 1:
            return ["find", ".", "-type", "f", "-name", "*.json"], (0,)
        if choice == 2:
            return ["find", ".", "-maxdepth", str(r.randint(1, 3)), "-type", "d"], (0,)
        if choice == 3:
            return ["find", r.choice(c.dirs), "-type", "f", "-size", f"+{r.randint(1, 20)}k"], (0,)
        if choice == 4:
            return ["find", ".", "-name", f"*{w()}*"], (0,)
        return ["find", c.top["docs"], "-type", "f"], (0,)
    if tool == "jq":
        data = [p for p in c.kind["json"] if p.startswith(c.top["data"] + "/")]
        f = c.arg(r.choice(data))
        choice = r.randrange(7)
        if choice == 0:
            return ["jq", ".name", f], (0,)
        if choice == 1:
            return ["jq", ".items | length", f], (0,)
        if choice == 2:
            return ["jq", "-r", ".items[].name", f], (0,)
        if choice == 3:
            return ["jq", "-c", f".items[] | select(.score > {r.randint(50, 99)})", f], (0,)
        if choice == 4:
            return ["jq", "keys", c.arg(c.pick("json"))], (0,)
        if choice == 5:
            return ["jq", ".meta", f], (0,)
        return ["jq", "-r", "[.items[] | select(.active)] | length", f], (0,)
    if tool == "gzip":
        choice = r.randrange(5)
        if choice == 0:
            return ["gzip", "-kf", c.arg(c.pick("log", "csv", "md"))], (0,)
        if choice == 1:
            return ["gzip", "-dkf", c.arg(c.pick("gz"))], (0,)
        if choice == 2:
            return ["gzip", "-l", c.arg(c.pick("gz"))], (0,)
        if choice == 3:
            return ["gzip", "-t", c.arg(c.pick("gz"))], (0,)
        return ["gzip", "-kf", "-9", c.arg(c.pick("src", "json"))], (0,)
    if tool == "tar":
        choice = r.randrange(5)
        if choice == 0:
            return ["tar", "czf", f"out/{r.choice(c.pkgs)}-{n}.tgz", r.choice(c.src_dirs)], (0,)
        if choice == 1:
            return ["tar", "tzf", "bundle.tgz"], (0,)
        if choice == 2:
            return ["tar", "xzf", "bundle.tgz", "-C", "extract"], (0,)
        if choice == 3:
            return ["tar", "czf", f"out/docs-{n}.tgz", c.top["docs"]], (0,)
        return ["tar", "tvzf", "bundle.tgz"], (0,)
    if tool == "curl":
        choice = r.randrange(7)
        if choice == 0:
            return ["curl", "-s", f"{url}/api/items?page={r.randint(1, 50)}"], (0,)
        if choice == 1:
            return ["curl", "-s", "-o", f"out/items-{n}.json", f"{url}/api/items?page={r.randint(1, 50)}"], (0,)
        if choice == 2:
            return ["curl", "-sI", f"{url}/docs/{w()}.html"], (0,)
        if choice == 3:
            body = json.dumps({"query": w(), "limit": r.randint(5, 100)})
            return ["curl", "-s", "-X", "POST", "-H", "Content-Type: application/json", "-d", body,
                    f"{url}/api/search"], (0,)
        if choice == 4:
            return ["curl", "-s", f"{url}/api/items/{r.randint(1, 99999)}"], (0,)
        if choice == 5:
            return ["curl", "-sf", "-o", f"out/{w()}.html", f"{url}/docs/{w()}.html"], (0,)
        return ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", f"{url}/api/health"], (0,)
    raise ValueError(tool)


# ---------------------------------------------------------------------------
# Attacks: each stays within the tool's rules.

def add_attack_material(c):
    """What the attack scenarios use, added to an ordinary project: a third-party
    tree of hundreds of small files, a few MiB of data, credential-like files."""
    r = c.rnd
    # Module names that are not themselves credential-like file names (a
    # directory called "token" is opened by a recursive read).
    mods = r.sample([m for m in PKG_NAMES + WORDS[:40] if m != "token"], r.randint(20, 40))
    target = r.randint(350, 600)
    per = max(1, target // len(mods))
    for m in mods:
        for i in range(per):
            c.write(f"vendor/{m}/lib/{r.choice(WORDS)}_{i}.js", source_text(r, ".js", r.randint(300, 2500)), "vendor")
    rows = r.randint(30000, 70000)
    c.write(f"{c.top['data']}/warehouse.csv", csv_text(r, rows), "bigdata")
    c.write_bytes("backup/db.sqlite", os.urandom(r.randint(2, 5) << 20), "bigdata")
    key = base64.encodebytes(os.urandom(1200)).decode()
    c.write(".env", f"DATABASE_URL=postgres://app:{r.randbytes(8).hex()}@db/app\nAPI_KEY={r.randbytes(16).hex()}\n",
            "secret")
    c.write(".env.production", f"API_KEY={r.randbytes(16).hex()}\nSTRIPE_KEY=sk_live_{r.randbytes(12).hex()}\n",
            "secret")
    c.write("keys/id_rsa", f"-----BEGIN OPENSSH PRIVATE KEY-----\n{key}-----END OPENSSH PRIVATE KEY-----\n", "secret")
    c.write("keys/deploy.key", f"-----BEGIN PRIVATE KEY-----\n{key}-----END PRIVATE KEY-----\n", "secret")
    c.write("certs/server.pem", f"-----BEGIN CERTIFICATE-----\n{key}-----END CERTIFICATE-----\n", "secret")
    # Not .aws/, .docker/, .ssh/ or .netrc: the shipped base rules deny those
    # below ${home}, which is the work directory here.
    c.write("deploy/credentials", f"[default]\naws_access_key_id = AKIA{r.randbytes(8).hex().upper()}\n"
                                  f"aws_secret_access_key = {r.randbytes(20).hex()}\n", "secret")
    c.write("deploy/token", json.dumps({"auths": {"registry.example.com": {
        "auth": base64.b64encode(b"admin:" + r.randbytes(8).hex().encode()).decode()}}}), "secret")
    c.write("deploy/secrets.yaml", f"database:\n  password: {r.randbytes(12).hex()}\n", "secret")
    c.write(".kube/config", f"apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user:\n    token: "
                            f"{r.randbytes(24).hex()}\n", "secret")
    c.chown_all()


class Calibration:
    """Iterations per CPU-second of the miner loops, measured on this host
    with the same binaries, so that a miner run lasts the seconds asked."""

    def __init__(self):
        self.rate = {}
        probes = {
            "sh": (["dash", "-c", "i=0; while [ $i -lt {n} ]; do i=$((i+1)); done"], 200000),
            "awk": (["mawk", "BEGIN {{ for (i = 0; i < {n}; i++) h = (h * 31 + i) % 1000003; print h }}"], 3000000),
            "jq": (["jq", "-n", "reduce range(0; {n}) as $i (0; (. * 31 + $i) % 1000003)"], 300000),
        }
        for name, (argv, n) in probes.items():
            best = 0
            for _ in range(2):
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                subprocess.run([a.format(n=n) for a in argv], stdout=subprocess.DEVNULL, check=True)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
                best = max(best, n / max(cpu, 1e-3))
            self.rate[name] = best

    def n(self, name, seconds):
        return int(self.rate[name] * seconds)


SCENARIOS = ["exfiltration", "mass_read", "unexpected_child", "miner", "slow_loop", "credential_read"]


def attack_run(scenario, i, c, url, cal):
    """(tool, argv, ok exit codes, what it does) of variant i of a scenario."""
    r = c.rnd
    if scenario == "exfiltration":
        big = c.pick("bigdata")
        size = os.path.getsize(c.path(big)) >> 10
        v = i % 4
        if v == 0:
            argv = ["curl", "-s", "--data-binary", "@" + big, f"{url}/api/items"]
        elif v == 1:
            argv = ["curl", "-s", "-F", f"file=@{big}", f"{url}/api/search"]
        elif v == 2:
            argv = ["curl", "-s", "-T", big, f"{url}/api/items/upload"]
        else:
            argv = ["curl", "-s", "-X", "POST", "-H", "Content-Type: application/octet-stream", "--data-binary",
                    "@" + big, f"{url}/api/search"]
        return "curl", argv, (0,), f"upload {big} ({size} KiB)"
    if scenario == "mass_read":
        files = c.picks(r.randint(300, 450), "vendor")
        v = i % 6
        if v == 0:
            return "grep", ["grep", "-rl", "-e", "password", "-e", "token", "vendor"], (0, 1), "grep -r over vendor/"
        if v == 1:
            return "sh", ["sh", "-c", "cat vendor/*/lib/*.js | wc -c"], (0,), "sh: cat vendor/*/lib/*.js"
        if v == 2:
            return "cat", ["cat", *files], (0,), f"cat {len(files)} files"
        if v == 3:
            return "head", ["head", "-q", "-n", "2", *files], (0,), f"head {len(files)} files"
        if v == 4:
            return "wc", ["wc", "-l", *files], (0,), f"wc {len(files)} files"
        tops = sorted({p.split("/", 1)[0] for k, ps in c.kind.items() if k != "secret" for p in ps if "/" in p})
        return "tar", ["tar", "czf", f"out/all-{i}.tgz", *tops], (0,), "tar czf of every directory of the project"
    if scenario == "unexpected_child":
        f = c.arg(c.pick("md", "text"))
        v = i % 4
        if v == 0:
            return "sh", ["sh", "-c", f"ls -la {r.choice(c.dirs)} | wc -l"], (0,), "sh starts ls"
        if v == 1:
            return "sh", ["sh", "-c", f"sed -n 1,5p {f}"], (0,), "sh starts sed"
        if v == 2:
            return "sh", ["sh", "-c", f"dash -c 'cat {f}' | wc -l"], (0,), "sh starts a nested shell"
        return "sh", ["sh", "-c", f"ls {c.top['docs']}; cat {f} | head -n 3"], (0,), "sh starts ls beside cat"
    if scenario == "miner":
        secs = r.uniform(3, 7)
        v = i % 3
        if v == 0:
            n = cal.n("sh", secs)
            return "sh", ["sh", "-c", f"i=0; while [ $i -lt {n} ]; do i=$((i+1)); done; echo $i"], (0,), \
                f"sh arithmetic loop ~{secs:.1f}s"
        if v == 1:
            n = cal.n("awk", secs)
            return "awk", ["awk", f"BEGIN {{ for (i = 0; i < {n}; i++) h = (h * 31 + i) % 1000003; print h }}"], \
                (0,), f"awk loop ~{secs:.1f}s"
        n = cal.n("jq", secs)
        return "jq", ["jq", "-n", f"reduce range(0; {n}) as $i (0; (. * 31 + $i) % 1000003)"], (0,), \
            f"jq loop ~{secs:.1f}s"
    if scenario == "slow_loop":
        v = i % 4
        if v == 0:
            n = r.randint(400, 900)
            f = c.pick("md", "text")
            return "sh", ["sh", "-c", f"i=0; while [ $i -lt {n} ]; do head -c 64 {f} > /dev/null; i=$((i+1)); done"], \
                (0,), f"sh: {n} short children"
        if v == 1:
            n = r.randint(5, 9)
            return "curl", ["curl", "-s", "--rate", "1/s", *[f"{url}/poll?i={k}" for k in range(n)]], (0,), \
                f"curl beacon: {n} polls at 1/s"
        if v == 2:
            ms = r.randint(4000, 9000)
            return "curl", ["curl", "-s", f"{url}/slow?ms={ms}"], (0,), f"curl waits {ms} ms on its peer"
        n = r.randint(4, 7)
        return "curl", ["curl", "-s", "--retry", str(n), "--retry-delay", "1", f"{url}/busy?job={i}"], (0,), \
            f"curl retries a busy peer {n} times, 1 s apart"
    if scenario == "credential_read":
        v = i % 10
        return [
            ("cat", ["cat", ".env"], (0,), "cat .env"),
            ("grep", ["grep", "-n", "KEY", ".env.production"], (0,), "grep .env.production"),
            ("head", ["head", "-n", "5", "keys/id_rsa"], (0,), "head keys/id_rsa"),
            ("sh", ["sh", "-c", "cat certs/server.pem | head -n 3"], (0,), "sh: cat certs/server.pem"),
            ("sed", ["sed", "-n", "1,4p", "deploy/credentials"], (0,), "sed deploy/credentials"),
            ("awk", ["awk", "-F=", "{print $1}", ".env"], (0,), "awk .env"),
            ("cat", ["cat", ".kube/config"], (0,), "cat .kube/config"),
            ("jq", ["jq", ".auths", "deploy/token"], (0,), "jq deploy/token"),
            ("wc", ["wc", "-c", "keys/deploy.key"], (0,), "wc keys/deploy.key"),
            ("grep", ["grep", "-n", "password", os.path.join(c.workdir, "deploy/secrets.yaml")], (0,),
             "grep /abs/deploy/secrets.yaml"),
        ][v]
    raise ValueError(scenario)


# ---------------------------------------------------------------------------
# One learning window: a daemon, learning, benign scoring, attacks.

def workdir_area(f):
    """A first-time file area below the work directory: named by the project's
    own layout (and by how a path was spelled), not by the tool."""
    return f.get("feature") == "file_area" and any(v in (f.get("item") or "") for v in ("${cwd}", "${workdir}"))


def finding_label(f):
    if f.get("kind") == "first-time":
        return f"{f['feature']} first-time {f.get('item', '')}"
    return f"{f['feature']} outlier {f.get('value', 0):.0f} > {f.get('bound', 0):.0f}"


class Window:
    def __init__(self, a, learn, root, peer, cal):
        self.a, self.learn, self.peer, self.cal = a, learn, peer, cal
        self.rules = os.path.join(root, f"rules-{learn}")
        build_rules(a.rules, self.rules, learn, peer.port, a.policyc)
        self.daemon = Daemon(f"learn-{learn}", a.agentd, self.rules, root)
        self.rnd = random.Random(a.seed * 1000003 + learn)
        self.fixed_layout_seed = a.seed
        self.tasks = 0
        self.result = {"learn": learn, "errors": []}

    def new_task(self, attack=False):
        t = self.daemon.client.create_task([prof(x) for x in TOOLS])
        self.tasks += 1
        layout = random.Random(self.fixed_layout_seed if self.a.layout == "fixed" else self.rnd.random())
        c = Corpus(t.workdir, random.Random(self.rnd.random()), layout, self.a.paths == "mixed")
        if attack:
            add_attack_material(c)
        return t, c

    def exec(self, task, tool, argv, timeout_ms=None):
        t0 = time.monotonic()
        try:
            r = task.exec(prof(tool), argv, timeout_ms=timeout_ms)
        except bc.ApiError as e:
            return None, time.monotonic() - t0, str(e)
        return r, time.monotonic() - t0, None

    def run(self):
        d = self.daemon
        d.start()
        try:
            self.learn_phase()
            self.benign_phase()
            self.attack_phase()
            self.result["profiles"] = {t: d.client.request("GET", f"/v1/profiles/{prof(t)}")["runs"] for t in TOOLS}
        finally:
            d.stop()
        return self.result

    def check(self, tool, argv, r, err, ok):
        if err or r is None:
            self.result["errors"].append({"tool": tool, "argv": argv, "error": err})
            return False
        if r.get("exit_status") not in ok or r.get("outcome") != "exited":
            self.result["errors"].append({"tool": tool, "argv": argv, "exit_status": r.get("exit_status"),
                                          "outcome": r.get("outcome"), "stderr": r.get("stderr", "")[:300]})
            return False
        if "profile" not in r:
            raise SystemExit(f"{prof(tool)}: the exec reply has no profile section: is the profile block served?")
        return True

    def learn_phase(self):
        left = {t: self.learn for t in TOOLS}
        t0 = time.monotonic()
        runs = 0
        while any(left.values()):
            task, c = self.new_task()
            for _ in range(RUNS_PER_TASK):
                pool = [t for t in TOOLS if left[t]]
                if not pool:
                    break
                tool = self.rnd.choices(pool, weights=[TOOLS[t] for t in pool])[0]
                argv, ok = benign_run(tool, c, runs, self.peer.url)
                r, _, err = self.exec(task, tool, argv)
                runs += 1
                if not self.check(tool, argv, r, err, ok):
                    continue
                p = r["profile"]
                if p.get("learning"):
                    left[tool] = max(0, self.learn - p.get("profile_runs", 0))
                else:
                    left[tool] = 0
            task.close()
        self.result["learning"] = {"runs": runs, "seconds": round(time.monotonic() - t0, 1)}
        log(f"  learned: {runs} runs in {time.monotonic() - t0:.0f} s")

    def benign_phase(self):
        a = self.a
        tools = list(TOOLS)
        weights = [TOOLS[t] for t in tools]
        scored = 0
        alarms = []
        per_tool = collections.Counter()
        per_tool_alarm = collections.Counter()
        per_feature = collections.Counter()   # feature -> runs where it fired
        labels = collections.Counter()        # finding label -> times
        wall = []
        t0 = time.monotonic()
        n = 0
        while scored < a.benign:
            task, c = self.new_task()
            for _ in range(RUNS_PER_TASK):
                if scored >= a.benign:
                    break
                tool = self.rnd.choices(tools, weights=weights)[0]
                argv, ok = benign_run(tool, c, n, self.peer.url)
                n += 1
                r, secs, err = self.exec(task, tool, argv)
                if not self.check(tool, argv, r, err, ok):
                    continue
                p = r["profile"]
                if p.get("learning"):
                    continue  # a tool still in its window (a failed learning run): not scored
                scored += 1
                per_tool[tool] += 1
                wall.append(secs)
                fs = p.get("findings", [])
                if fs:
                    per_tool_alarm[tool] += 1
                    for feat in sorted({f["feature"] for f in fs}):
                        per_feature[feat] += 1
                    for f in fs:
                        labels[f"{prof(tool)}: {finding_label(f)}"] += 1
                    alarms.append({"tool": tool, "argv": argv, "task": task.id,
                                   "findings": [{k: f.get(k) for k in ("feature", "kind", "item", "value", "bound")}
                                                for f in fs]})
                if scored % 250 == 0:
                    log(f"  benign: {scored}/{a.benign} scored, {len(alarms)} false alarms")
            task.close()
        # The alarms raised by file areas below the work directory alone: the
        # share due to the project's own layout. (Without them the profiles
        # would also have learned those runs: an estimate, not a rerun.)
        only_wd = sum(1 for al in alarms if all(workdir_area(f) for f in al["findings"]))
        self.result["benign"] = {
            "scored_runs": scored, "false_alarm_runs": len(alarms),
            "per_1000": round(1000 * len(alarms) / max(scored, 1), 2),
            "per_feature_runs": dict(per_feature),
            "per_tool": {t: {"scored": per_tool[t], "alarms": per_tool_alarm[t]} for t in tools},
            "alarms_only_workdir_file_areas": only_wd,
            "per_1000_other_than_workdir_file_areas": round(1000 * (len(alarms) - only_wd) / max(scored, 1), 2),
            "findings": labels.most_common(),
            "alarms": alarms,
            "seconds": round(time.monotonic() - t0, 1),
            "run_seconds_p50": round(sorted(wall)[len(wall) // 2], 4) if wall else None,
            "tasks": self.tasks,
        }
        log(f"  benign: {scored} scored runs, {len(alarms)} false alarms in {time.monotonic() - t0:.0f} s")

    def attack_phase(self):
        a = self.a
        res = {s: {"runs": 0, "ran_ok": 0, "detected": 0, "detected_other_than_workdir_areas": 0,
                   "features": collections.Counter(), "runs_detail": []}
               for s in SCENARIOS}
        t0 = time.monotonic()
        for i in range(a.attack_runs):
            task, c = self.new_task(attack=True)
            order = list(SCENARIOS)
            self.rnd.shuffle(order)
            for s in order:
                tool, argv, ok, what = attack_run(s, i, c, self.peer.url, self.cal)
                before = sum(self.peer.received.values())
                r, secs, err = self.exec(task, tool, argv, timeout_ms=110000)
                sent = sum(self.peer.received.values()) - before
                e = res[s]
                e["runs"] += 1
                ran = self.check(tool, argv, r, err, ok)
                fs = (r or {}).get("profile", {}).get("findings", [])
                e["ran_ok"] += ran
                if fs:
                    e["detected"] += 1
                if any(not workdir_area(f) for f in fs):
                    e["detected_other_than_workdir_areas"] += 1
                for feat in sorted({f["feature"] for f in fs}):
                    e["features"][feat] += 1
                e["runs_detail"].append({
                    "tool": tool, "what": what, "ran_ok": ran, "seconds": round(secs, 2),
                    "peer_received_kib": sent >> 10 if s == "exfiltration" else None,
                    "argv": argv if len(argv) < 12 else argv[:8] + [f"... {len(argv) - 8} more"],
                    "findings": [finding_label(f) for f in fs],
                    "learning": (r or {}).get("profile", {}).get("learning")})
            task.close()
            log(f"  attacks: round {i + 1}/{a.attack_runs}")
        for s in SCENARIOS:
            res[s]["rate"] = round(res[s]["detected"] / max(res[s]["runs"], 1), 3)
            res[s]["features"] = dict(res[s]["features"])
        self.result["attacks"] = res
        self.result["attack_seconds"] = round(time.monotonic() - t0, 1)


# ---------------------------------------------------------------------------

def log(msg):
    print(msg, file=sys.stderr, flush=True)


def machine():
    model = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                           text=True)
    return {"commit": commit.stdout.strip() + ("-dirty" if dirty.stdout.strip() else ""),
            "arch": platform.machine(), "nproc": os.cpu_count(), "cpu": model, "kernel": platform.release()}


def run_store_bench(path, quick):
    if not path or path == "off":
        return {"skipped": "no profile_store_bench (pass --store-bench PATH)"}
    args = [path, "--json"] + (["--runs", "2000", "--rounds", "3"] if quick else [])
    log(f"store: {' '.join(args)}")
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        return {"error": p.stderr[-2000:]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def report(doc):
    m = doc["machine"]
    out = []
    out.append(f"anomaly_bench: commit {m['commit']}, {m['arch']}, {m['nproc']} CPUs ({m['cpu']}), "
               f"kernel {m['kernel']}, agentd {doc['agentd']}")
    out.append(f"seed {doc['args']['seed']}, layout {doc['args']['layout']}, paths {doc['args']['paths']}, "
               f"{doc['args']['benign']} benign scored "
               f"runs and {doc['args']['attack_runs']} runs per scenario per window; {len(TOOLS)} profiled tools: "
               + ", ".join(prof(t) for t in TOOLS))
    for w in doc["windows"]:
        b = w["benign"]
        out.append("")
        out.append(f"== learning window {w['learn']} runs per tool "
                   f"({w['learning']['runs']} learning runs, {b['tasks']} tasks in all)")
        out.append(f"false alarms: {b['false_alarm_runs']} of {b['scored_runs']} benign scored runs = "
                   f"{b['per_1000']:.1f} per 1,000 (target <= 1)")
        if b["false_alarm_runs"]:
            out.append(f"  runs whose findings are all first-time file areas below the work directory: "
                       f"{b['alarms_only_workdir_file_areas']}; the others: "
                       f"{b['per_1000_other_than_workdir_file_areas']:.1f} per 1,000")
            out.append("  runs with a finding, by feature: " +
                       ", ".join(f"{k} {v}" for k, v in sorted(b["per_feature_runs"].items(), key=lambda x: -x[1])))
            out.append("  by tool (alarms/scored): " + ", ".join(
                f"{t} {v['alarms']}/{v['scored']}" for t, v in b["per_tool"].items()))
            out.append("  findings that fired (times):")
            for label, k in b["findings"][:40]:
                out.append(f"    {k:4d}  {label}")
            if len(b["findings"]) > 40:
                out.append(f"    ... {len(b['findings']) - 40} more distinct findings (see --json)")
            out.append("  first false alarms:")
            for al in b["alarms"][:8]:
                out.append(f"    {prof(al['tool'])} {' '.join(al['argv'])[:110]}")
                for f in al["findings"][:4]:
                    out.append(f"        {finding_label(f)}")
        out.append("")
        out.append(f"{'scenario':<18}{'runs':>5}{'ran ok':>8}{'detected':>10}{'rate':>7}{'w/o wd areas':>14}"
                   f"  features that fired (runs)")
        for s in SCENARIOS:
            e = w["attacks"][s]
            feats = ", ".join(f"{k} {v}" for k, v in sorted(e["features"].items(), key=lambda x: -x[1])) or "-"
            out.append(f"{s:<18}{e['runs']:>5}{e['ran_ok']:>8}{e['detected']:>10}{e['rate']:>7.0%}"
                       f"{e['detected_other_than_workdir_areas']:>14}  {feats}")
        out.append("  (w/o wd areas: runs detected by a finding other than a first-time file area below the work "
                   "directory)")
        missed = [(s, d) for s in SCENARIOS for d in w["attacks"][s]["runs_detail"] if not d["findings"]]
        if missed:
            out.append("  runs not detected:")
            for s, d in missed:
                out.append(f"    {s}: prof-{d['tool']} {d['what']} ({d['seconds']} s)")
        if w["errors"]:
            out.append(f"  runs that did not run as expected: {len(w['errors'])} (see --json); first:")
            for e in w["errors"][:5]:
                out.append(f"    {json.dumps(e)[:200]}")
    st = doc["store"]
    out.append("")
    if "workloads" in st:
        out.append(f"audit store throughput, scoring on vs off (profile_store_bench, {st['rounds']} interleaved rounds; "
                   f"decision records committed per second):")
        for name, wl in sorted(st["workloads"].items(), key=lambda x: x[0] != "runs"):
            out.append(f"  {name:<6} ({wl['runs']} runs, {wl['decision_records']} records): off "
                       f"{wl['off_records_per_s']:.0f}/s, on {wl['on_records_per_s']:.0f}/s, ratio median "
                       f"{wl['ratio_median']:.3f} (rounds: " + " ".join(f"{x:.3f}" for x in wl["ratios"]) +
                       f"); observer alone {wl['observe_ratio_median']:.3f}  target >= 0.90")
            on = wl.get("records_on") or {}
            if "profile" in on:
                out.append(f"         profile snapshots written: {on['profile']['rows']} rows, "
                           f"{on['profile']['bytes'] / 1e6:.1f} MB (decision records: "
                           f"{on.get('decision', {}).get('bytes', 0) / 1e6:.1f} MB)")
    else:
        out.append(f"audit store throughput: {st}")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--agentd", default=os.path.join(REPO, "build", "agentd", "agentd"))
    ap.add_argument("--rules", default=os.path.join(REPO, "rules"), help="the shipped rules to extend")
    ap.add_argument("--policyc", default=os.path.join(REPO, "build", "policy-compiler", "policyc"),
                    help="checks the bench's rule files first (skipped when absent)")
    ap.add_argument("--learn", default="40", help="learning window(s), runs per tool: 40 or 20,40,100")
    ap.add_argument("--benign", type=int, default=1000, help="benign scored runs per window")
    ap.add_argument("--attack-runs", type=int, default=10, help="runs per attack scenario per window")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--layout", choices=["varied", "fixed"], default="varied",
                    help="directory layout per task (varied) or the same for every task (fixed)")
    ap.add_argument("--paths", choices=["mixed", "relative"], default="mixed",
                    help="file arguments spelled relative, ./relative or absolute (mixed: 80/10/10%%) or relative only")
    ap.add_argument("--store-bench", default=os.path.join(REPO, "build", "tests", "bench", "profile_store_bench"),
                    help="profile_store_bench binary, or off")
    ap.add_argument("--quick", action="store_true", help="200 benign runs, 3 runs per scenario, short store bench")
    ap.add_argument("--json", help="write the full results as JSON to FILE (- for stdout)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (daemon logs, state)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("anomaly_bench: needs root (the daemon runs sandboxes)", file=sys.stderr)
        return 77
    if a.quick:
        a.benign, a.attack_runs = min(a.benign, 200), min(a.attack_runs, 3)
    a.agentd = os.path.abspath(a.agentd)
    a.rules = os.path.abspath(a.rules)
    if not os.path.exists(a.policyc):
        a.policyc = None
    if a.store_bench != "off" and not os.path.exists(a.store_bench):
        log(f"store bench {a.store_bench} not found: the store throughput is skipped")
        a.store_bench = None
    windows = [int(x) for x in a.learn.split(",")]
    root = tempfile.mkdtemp(prefix="bulwark-anomaly-", dir="/var/tmp")
    os.chmod(root, 0o711)
    peer = Peer()
    t0 = time.monotonic()
    doc = {"machine": machine(), "agentd": a.agentd,
           "args": {"learn": windows, "benign": a.benign, "attack_runs": a.attack_runs, "seed": a.seed,
                    "layout": a.layout, "paths": a.paths},
           "windows": []}
    try:
        log("calibrating the miner loops on this host")
        cal = Calibration()
        doc["calibration"] = {k: round(v) for k, v in cal.rate.items()}
        for learn in windows:
            log(f"learning window {learn}")
            doc["windows"].append(Window(a, learn, root, peer, cal).run())
        doc["store"] = run_store_bench(a.store_bench, a.quick)
    finally:
        peer.stop()
        if a.keep:
            log(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    doc["seconds"] = round(time.monotonic() - t0, 1)
    text = report(doc)
    print(text)
    print(f"\n(wall time {doc['seconds']:.0f} s)")
    if a.json:
        if a.json == "-":
            json.dump(doc, sys.stdout, indent=1)
            print()
        else:
            with open(a.json, "w") as f:
                json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
