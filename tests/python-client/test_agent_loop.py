"""clients/python/examples/agent_loop.py end to end against a real `agentd serve`
(through tests/support/with_agentd.sh): its output, and what the daemon holds
afterwards, checked through the API independently of the example."""

import os
import re
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENTS = os.path.join(HERE, "..", "..", "clients", "python")
sys.path.insert(0, CLIENTS)

import bulwark_client as bc  # noqa: E402

SOCKET = os.environ.get("BULWARK_SOCKET")


def setUpModule():
    if not SOCKET:
        raise RuntimeError("needs a daemon: run through tests/support/with_agentd.sh")


class AgentLoopTest(unittest.TestCase):
    def test_agent_loop(self):
        p = subprocess.run(
            [sys.executable, os.path.join(CLIENTS, "examples", "agent_loop.py"), "--socket", SOCKET,
             "--timebox-ms", "2000"],
            capture_output=True, text=True, timeout=240,
        )
        out = p.stdout
        self.assertEqual(p.returncode, 0, out + p.stderr)
        m = re.search(r"^task (\d+): work directory (\S+);", out, re.M)
        self.assertIsNotNone(m, out)
        task_id, workdir = int(m.group(1)), m.group(2)

        # The steps, in order, as printed.
        steps = [
            r"\[lines with an a\] sh run \d+ \(epoch 1\): exit 0 -> ok",
            r"\[count into out/\] sh run \d+ \(epoch 1\): exit 0 -> ok",
            r"\[write report.txt \(narrow grant\)\] sh run \d+ \(epoch 1\): exit 2 -> FAILED",
            r"stderr: .*cannot create report.txt: Permission denied",
            # the kernel's denial, explained: the rule of sh that allows it, the grant that would
            rf"denied by landlock file_create {re.escape(workdir)}: denied: no rule allows create",
            r"the tool's rules allow this \(\S+/rules/sh\.yaml:\d+:\d+ .*A grant that also names it would allow it\.",
            rf'grant: {{"files": \[{{"path": "{re.escape(workdir)}", "rights": \["create"\]}}\]}}',
            r"-> denied as the narrow grant says",
            r"\[widen\] epoch 2:",
            r"\[write report.txt \(widened\)\] sh run \d+ \(epoch 2\): exit 0 -> ok",
            r"\[expiry\] epoch 3: back to the narrow grant \(expiry\)",
            r"\[write late.txt \(after expiry\)\] sh run \d+ \(epoch 3\): exit 2 -> FAILED",
            rf"denied by landlock file_create {re.escape(workdir)}",
            r"-> denied again",
            rf"task {task_id} closed",
            rf"audit trail of task {task_id}:",
        ]
        pos = 0
        for s in steps:
            found = re.compile(s, re.M).search(out, pos)
            self.assertIsNotNone(found, f"{s!r} not found after offset {pos} in:\n{out}")
            pos = found.end()

        # What the daemon holds, read independently of the example.
        api = bc.Client.unix(SOCKET)
        t = api.task(task_id)
        self.assertEqual(t["state"], "closed")
        self.assertEqual([e["reason"] for e in t["epochs"]], ["create", "timebox", "expiry"])
        self.assertEqual([r["exit_status"] for r in t["runs"]], [0, 0, 2, 0, 2])
        self.assertEqual([r["epoch"] for r in t["runs"]], [1, 1, 1, 2, 3])
        with open(os.path.join(workdir, "out", "count.txt")) as f:
            self.assertEqual(f.read().strip(), "3")
        with open(os.path.join(workdir, "report.txt")) as f:
            self.assertEqual(f.read().strip(), "3")
        self.assertFalse(os.path.exists(os.path.join(workdir, "late.txt")))

        # The printed audit trail is the task's records, every one of them.
        rows = list(api.audit(task=task_id))
        printed = re.findall(r"^  #(\d+) (\w+)", out, re.M)
        self.assertEqual([(str(r["seq"]), r["kind"]) for r in rows], printed)
        self.assertIn(f"{len(rows)} records", out)
        self.assertEqual(sum(1 for r in rows if r["kind"] == "run_start"), 5)
        self.assertEqual(sum(1 for r in rows if r["kind"] == "run_exit"), 5)
        # The two denied writes are the task's kernel deny records, and printed.
        denies = [r for r in rows if r["kind"] == "decision" and r.get("decision") == "deny"]
        self.assertGreaterEqual(len(denies), 2)
        self.assertTrue(all(r["layer"] == "landlock" for r in denies), denies)
        self.assertEqual(len(re.findall(r"^  #\d+ decision tool=sh run=\d+ landlock deny file_create ", out, re.M)),
                         sum(1 for r in denies if r.get("op") == "file_create"))


if __name__ == "__main__":
    unittest.main()
