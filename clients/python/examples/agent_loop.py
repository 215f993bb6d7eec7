#!/usr/bin/env python3
"""An agent loop over Bulwark's API, the way an agent framework drives it.

1. create a task for `sh` with a narrow grant: it may create and write files
   only in ${workdir}/out (its rules allow the whole work directory);
2. run tools: read an input handed over as a working file, count it into out/;
3. try an operation the grant does not allow (writing report.txt at the top
   of the work directory): denied, with the explanation the API gives;
4. widen the grant for one subtask, time-boxed: the same write succeeds;
5. after the grant's end the task is back on the narrow grant: denied again;
6. close the task and print its audit trail from /v1/audit.

Usage: agent_loop.py [--socket PATH | --url http://127.0.0.1:PORT --token TOKEN]
(defaults: $BULWARK_SOCKET, else /run/bulwark/agentd.sock).
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bulwark_client import ApiError, Client  # noqa: E402

NARROW = {"files": [{"path": "${workdir}/out", "rights": ["create", "write"]}]}
WIDE = {"files": [{"path": "${workdir}", "rights": ["create", "write"]}]}
INPUT = "alpha\nbeta\ngamma\n"


def show_run(step: str, r: dict) -> None:
    status = "ok" if r["exit_status"] == 0 and not r["denials"] else "FAILED"
    print(f"[{step}] {r['tool']} run {r['run_id']} (epoch {r['epoch']}): exit {r['exit_status']} -> {status}")
    for stream in ("stdout", "stderr"):
        for line in r[stream].splitlines():
            print(f"    {stream}: {line}")
    for d in r["denials"]:
        where = f" {d.get('op', '')} {d.get('object', '')}".rstrip()
        print(f"    denied by {d['layer']}{where}: {d['explanation']}")
        if d.get("rule"):
            print(f"      rule: {d['rule']}")
        if d.get("grant_would_allow"):
            print(f"      {d['grant_would_allow']['message']}")
            print(f"      grant: {json.dumps(d['grant_would_allow']['grant'])}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--socket", default=os.environ.get("BULWARK_SOCKET", "/run/bulwark/agentd.sock"))
    p.add_argument("--url", help="the TCP listener instead of the socket, e.g. http://127.0.0.1:7878")
    p.add_argument("--token", default=os.environ.get("BULWARK_TOKEN"))
    p.add_argument("--timebox-ms", type=int, default=3000, help="length of the widened grant")
    a = p.parse_args()
    api = Client.tcp(a.url, a.token) if a.url else Client.unix(a.socket)

    print(f"agentd: {api.health()['status']}, tools: {', '.join(t['name'] for t in api.tools())}")
    task = api.create_task(["sh"], grant=NARROW, label="agent loop example")
    print(f"task {task.id}: work directory {task.workdir}; grant: create/write only in out/")

    # The input arrives as working files; out/ is where the grant lets tools write.
    r = task.exec("sh", ["sh", "-c", "grep -c a data/input.txt"], files={"data/input.txt": INPUT, "out/.keep": ""})
    show_run("lines with an a", r)
    r = task.exec("sh", ["sh", "-c", "wc -l < data/input.txt > out/count.txt && cat out/count.txt"])
    show_run("count into out/", r)

    denied = task.exec("sh", ["sh", "-c", "cat out/count.txt > report.txt"])
    show_run("write report.txt (narrow grant)", denied)
    if denied["exit_status"] == 0:
        print("unexpected: the narrow grant allowed report.txt")
        return 1
    print("    -> denied as the narrow grant says")

    # One subtask needs to write at the top of the work directory: a wider grant
    # (still within the tools' rules), for a few seconds only.
    try:
        g = task.update_grant(WIDE, expires_in_ms=a.timebox_ms)
    except ApiError as e:
        print(f"the widening grant was refused: {e.code}: {e.message}")
        return 1
    print(f"[widen] epoch {g['epoch']}: create/write in the whole work directory for {a.timebox_ms} ms")
    r = task.exec("sh", ["sh", "-c", "cat out/count.txt > report.txt && echo report written"])
    show_run("write report.txt (widened)", r)
    if r["exit_status"] != 0:
        return 1

    deadline = time.monotonic() + a.timebox_ms / 1000 + 10
    while task.refresh()["epoch"] == g["epoch"] and time.monotonic() < deadline:
        time.sleep(0.1)
    t = task.refresh()
    print(f"[expiry] epoch {t['epoch']}: back to the narrow grant ({t['epochs'][-1]['reason']})")
    again = task.exec("sh", ["sh", "-c", "echo late > late.txt"])
    show_run("write late.txt (after expiry)", again)
    if again["exit_status"] == 0:
        print("unexpected: the widened grant outlived its time box")
        return 1
    print("    -> denied again")

    closed = task.close()
    print(f"task {task.id} {closed['state']}")
    # The close is recorded asynchronously: wait (briefly) until the store has it.
    for _ in range(50):
        if any((r.get("detail") or {}).get("change") == "close" for r in api.audit(task=task.id, kind="policy_epoch")):
            break
        time.sleep(0.1)

    print(f"audit trail of task {task.id}:")
    n = 0
    for row in api.audit(task=task.id):
        n += 1
        parts = [f"  #{row['seq']}", row["kind"]]
        if "tool" in row:
            parts.append(f"tool={row['tool']}")
        if "run_id" in row:
            parts.append(f"run={row['run_id']}")
        if "decision" in row:
            parts.append(f"{row.get('layer', '')} {row['decision']} {row.get('op', '')} {row.get('object', '')}")
            rule = row.get("rule") or {}
            if rule.get("file"):
                parts.append(f"rule={rule['file']}:{rule['line']}")
        detail = row.get("detail")
        if row["kind"] == "policy_epoch" and isinstance(detail, dict):
            parts.append(f"epoch={detail.get('epoch')} change={detail.get('change')}")
            if detail.get("grant") is not None:
                parts.append("grant=" + json.dumps(detail["grant"]))
        if row["kind"] == "run_exit" and isinstance(detail, dict):
            parts.append(f"exit={detail.get('exit_status')}")
        print(" ".join(str(x) for x in parts))
    print(f"{n} records")
    return 0


if __name__ == "__main__":
    sys.exit(main())
