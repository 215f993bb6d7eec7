#!/usr/bin/env python3
"""A scripted agent session for the main job: allowed and denied operations
across files, exec and network, so the live dashboard has something to show.

Each step states what the policy should decide and checks it against what the
kernel really did (the run's exit, its decisions and the explained denials).
The exit status is 0 when every step went as expected, 1 otherwise.

Usage: demo_session.py [--socket PATH | --url http://127.0.0.1:PORT --token T]
                       [--rounds N] [--pause SECONDS]
"""

import argparse
import http.server
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bulwark_client import ApiError, Client  # noqa: E402

NARROW = {"files": [{"path": "${workdir}/out", "rights": ["create", "write"]}]}
PROXY = ("127.0.0.1", 3128)  # where rules/curl-proxy.yaml lets curl connect


class Egress(http.server.BaseHTTPRequestHandler):
    """Stands in for the host's egress proxy: answers every GET."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        body = b"hello from the egress proxy\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def start_egress():
    try:
        srv = http.server.ThreadingHTTPServer(PROXY, Egress)
    except OSError as e:
        print(f"  (no egress stand-in on {PROXY[0]}:{PROXY[1]}: {e}; the allowed fetch is skipped)")
        return None
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


# API errors that are the policy's answer (the launch refused for a rule no
# layer in force holds); any other API error is a failure of the session.
POLICY_REFUSALS = {"rule_unenforced"}


class Session:
    def __init__(self, api: Client, egress):
        self.api = api
        self.egress = egress
        self.unexpected = 0

    def step(self, what: str, task, tool: str, argv, expect_denied: bool, **kw) -> None:
        try:
            r = task.exec(tool, argv, **kw)
        except ApiError as e:
            if e.code not in POLICY_REFUSALS:
                # A failing API (a bad request, a busy store, an internal
                # error) says nothing about the policy: never a denial.
                self.unexpected += 1
                print(f"  {what:<66} API ERROR  <-- UNEXPECTED ({e})")
                return
            # The policy refused the launch at the API (the tool never started).
            denied, detail = True, f"refused by the policy: {e.code}: {e.message}"
            r = None
        else:
            # Denied means a layer of the sandbox said so (a denial record),
            # not merely a failing tool: a file the host's own permissions
            # keep from the tool would prove nothing about the policy.
            # glibc asks the name service cache daemon first for every user or
            # host lookup; the refusal of that unix socket (sock_unix, no rule
            # grants it) is expected, and glibc falls back to files and DNS.
            r["denials"] = [d for d in r["denials"] if not str(d.get("object") or "").endswith("/nscd/socket")]
            denied = bool(r["denials"])
            detail = f"exit {r['exit_status']}"
        ok = denied == expect_denied and (denied or r is None or r["exit_status"] == 0)
        self.unexpected += 0 if ok else 1
        verdict = ("denied" if denied else "allowed") + ("" if ok else "  <-- UNEXPECTED")
        print(f"  {what:<66} {verdict} ({detail})")
        for d in (r or {}).get("denials", [])[:2]:
            where = " ".join(x for x in (d.get("op") or "", d.get("object") or "") if x)
            print(f"      {d['layer']}: {where or d.get('explanation', '')} {d.get('rule') or ''}".rstrip())
            if d.get("grant_would_allow"):
                print(f"      would be allowed by: {d['grant_would_allow'].get('message', '')}")


def layers(api: Client) -> None:
    h = api.health()
    host = h.get("host", {})
    for name, state in sorted(host.get("layers", {}).items()):
        text = state if isinstance(state, str) else state.get("state", state)
        print(f"  {name:<22} {text}")


def round_once(s: Session, n: int) -> None:
    api = s.api
    # A grant applies to every tool of a task and may only narrow each one,
    # so the reader and the writer are two subtasks with their own policies.
    reader = api.create_task(["cat", "curl-proxy"], label=f"demo round {n}: read and fetch")
    print(f"round {n}, task {reader.id}: cat and curl-proxy under their rule files")
    files = {"notes.txt": "the plan: count the words\n"}
    s.step("files: cat notes.txt (in the work directory)", reader, "cat", ["cat", "notes.txt"], False, files=files)
    s.step("files: cat /etc/passwd (a host file outside its rules)", reader, "cat", ["cat", "/etc/passwd"], True)
    if s.egress:
        s.step("network: curl fetches from the egress proxy (granted)", reader, "curl-proxy",
               ["curl", "-sS", "-m", "5", "--noproxy", "*", "http://127.0.0.1:3128/hello.txt"], False)
    # Landlock's TCP rules know only ports: the address is the cgroup
    # socket programs' to judge.
    s.step("network: curl to 127.0.0.2:3128 (the proxy's port, other address)", reader, "curl-proxy",
           ["curl", "-sS", "-m", "3", "--noproxy", "*", "http://127.0.0.2:3128/"], True)
    s.step("network: curl to 169.254.169.254 (cloud metadata)", reader, "curl-proxy",
           ["curl", "-sS", "-m", "3", "--noproxy", "*", "http://169.254.169.254/latest/meta-data/"], True)
    s.step("network: curl to 127.0.0.1:22 (a host daemon)", reader, "curl-proxy",
           ["curl", "-sS", "-m", "3", "--noproxy", "*", "http://127.0.0.1:22/"], True)

    writer = api.create_task(["sh"], grant=NARROW, label=f"demo round {n}: write results")
    print(f"round {n}, task {writer.id}: sh, granted create/write only in out/")
    files = {"notes.txt": "the plan: count the words\n", "out/.keep": ""}
    s.step("files: sh writes out/count.txt (granted)", writer, "sh", ["sh", "-c", "wc -w notes.txt > out/count.txt"],
           False, files=files)
    s.step("files: sh writes report.txt (outside the grant)", writer, "sh", ["sh", "-c", "echo done > report.txt"],
           True)
    s.step("exec: sh runs ls (in its exec list)", writer, "sh", ["sh", "-c", "ls out"], False)
    s.step("exec: sh runs /usr/bin/id (not in its exec list)", writer, "sh", ["sh", "-c", "/usr/bin/id"], True)
    # One subtask needs more: a time-boxed grant widens sh for five seconds.
    writer.update_grant({"files": [{"path": "${workdir}", "rights": ["create", "write"]}]}, expires_in_ms=5000)
    widened = len(writer.refresh()["epochs"])
    s.step("grant widened for 5 s: sh writes report.txt", writer, "sh", ["sh", "-c", "echo done > report.txt"], False)
    # The daemon ends the time box by itself with a new epoch (the grant before).
    deadline = time.monotonic() + 30
    while len(writer.refresh()["epochs"]) == widened and time.monotonic() < deadline:
        time.sleep(0.2)
    s.step("grant expired: sh writes report.txt again", writer, "sh", ["sh", "-c", "echo again > report.txt"], True)
    for task in (reader, writer):
        task.close()
        trail = list(api.audit(task=task.id, kind="decision"))
        denied = sum(1 for r in trail if r.get("decision") == "deny")
        print(f"  audit trail of task {task.id}: {len(trail)} decisions, {denied} denials")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--socket", default=os.environ.get("BULWARK_SOCKET", "/run/bulwark/agentd.sock"))
    p.add_argument("--url", help="the TCP listener instead of the socket")
    p.add_argument("--token", default=os.environ.get("BULWARK_TOKEN"))
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--pause", type=float, default=20.0, help="seconds between rounds")
    p.add_argument("--require-egress", action="store_true",
                   help="fail when the egress stand-in cannot listen on 127.0.0.1:3128 (tests)")
    a = p.parse_args()
    api = Client.tcp(a.url, a.token) if a.url else Client.unix(a.socket)
    print("layers in force on this host:")
    layers(api)
    egress = start_egress()
    if a.require_egress and not egress:
        return 1
    s = Session(api, egress)
    for n in range(1, a.rounds + 1):
        round_once(s, n)
        if n < a.rounds:
            time.sleep(a.pause)
    print("every step went as the policy says" if not s.unexpected else f"{s.unexpected} step(s) UNEXPECTED")
    return 0 if not s.unexpected else 1


if __name__ == "__main__":
    sys.exit(main())
