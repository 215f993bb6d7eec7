"""clients/python/bulwark_client.py against a real `agentd serve`.

Run through tests/support/with_agentd.sh, which provides BULWARK_SOCKET,
BULWARK_URL and BULWARK_TOKEN of a daemon of its own.
"""

import os
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "clients", "python"))

import bulwark_client as bc  # noqa: E402

SOCKET = os.environ.get("BULWARK_SOCKET")
URL = os.environ.get("BULWARK_URL")
TOKEN = os.environ.get("BULWARK_TOKEN")


def setUpModule():
    if not (SOCKET and URL and TOKEN):
        raise RuntimeError("needs a daemon: run through tests/support/with_agentd.sh")


class ClientTest(unittest.TestCase):
    def setUp(self):
        self.api = bc.Client.unix(SOCKET)

    def task(self, tools, **kw):
        t = self.api.create_task(tools, **kw)
        self.addCleanup(lambda: t.close())
        return t

    def test_unix_health_and_tools(self):
        self.assertEqual(self.api.health()["status"], "ok")
        names = {t["name"] for t in self.api.tools()}
        self.assertIn("cat", names)
        self.assertIn("sh", names)
        self.assertIn("policy cat", self.api.explain("cat"))
        self.assertEqual(self.api.tool("cat")["name"], "cat")

    def test_tcp_with_bearer_token(self):
        tcp = bc.Client.tcp(URL, TOKEN)
        self.assertEqual(tcp.health()["status"], "ok")
        with self.assertRaises(bc.Unauthorized) as wrong:
            bc.Client.tcp(URL, "x" * 32).health()
        self.assertEqual(wrong.exception.status, 401)
        with self.assertRaises(bc.Unauthorized) as missing:
            bc.Client(url=URL).health()
        self.assertEqual(missing.exception.code, "missing_token")
        # A task made over TCP is the same daemon's task.
        t = bc.Client.tcp(URL, TOKEN).create_task(["cat"], label="over tcp")
        self.addCleanup(t.close)
        self.assertEqual(self.api.task(t.id)["label"], "over tcp")

    def test_transport_error(self):
        with self.assertRaises(bc.TransportError):
            bc.Client.unix("/nonexistent/agentd.sock").health()
        with self.assertRaises(ValueError):
            bc.Client()

    def test_daemon_unavailable_is_retried_then_reported(self):
        # Nothing listens: raised at once, the request was never sent.
        t0 = time.monotonic()
        with self.assertRaises(bc.DaemonUnavailable):
            bc.Client.unix("/nonexistent/agentd.sock").health()
        self.assertLess(time.monotonic() - t0, 1.0)
        # With retry_unavailable, the client keeps trying for that long ...
        t0 = time.monotonic()
        with self.assertRaises(bc.DaemonUnavailable):
            bc.Client.unix("/nonexistent/agentd.sock", retry_unavailable=0.6).health()
        self.assertGreaterEqual(time.monotonic() - t0, 0.3)
        # ... and gets through once the socket answers (the real daemon's, here).
        self.assertEqual(bc.Client.unix(SOCKET, retry_unavailable=5).health()["status"], "ok")

    def test_exec_with_files_stdin_and_stream(self):
        t = self.task(["cat", "sh"], label="client exec")
        r = t.exec("cat", ["cat", "in/a.txt"], files={"in/a.txt": "from a file\n"})
        self.assertEqual(r["exit_status"], 0)
        self.assertEqual(r["stdout"], "from a file\n")
        self.assertEqual(r["files"], [{"path": "in/a.txt", "bytes": 12}])
        self.assertTrue(os.path.isfile(os.path.join(t.workdir, "in", "a.txt")))
        r = t.exec("cat", ["cat", "-"], stdin="through stdin\n")
        self.assertEqual(r["stdout"], "through stdin\n")

        events = list(t.exec_stream("sh", ["sh", "-c", "echo one; echo two >&2; exit 3"]))
        kinds = [e for e, _ in events]
        self.assertEqual(kinds[0], "run")
        self.assertEqual(kinds[-1], "exit")
        self.assertIn("stdout", kinds)
        self.assertIn("stderr", kinds)
        out = "".join(d["data"] for e, d in events if e == "stdout")
        self.assertEqual(out, "one\n")
        self.assertEqual(events[-1][1]["exit_status"], 3)

        runs = t.refresh()["runs"]
        self.assertEqual(len(runs), 3)

    def test_cancel_by_client_ref(self):
        t = self.task(["sh"], label="client cancel")
        results = {}

        def spin(ref):
            results[ref] = t.exec("sh", ["sh", "-c", "while :; do :; done"], timeout_ms=3000, client_ref=ref)

        threads = [threading.Thread(target=spin, args=(ref,)) for ref in ("keep", "stop")]
        for th in threads:
            th.start()
        deadline = time.monotonic() + 10
        while t.refresh()["running"] < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        started = time.monotonic()
        self.assertEqual(len(t.cancel("stop")["cancelled_runs"]), 1)
        threads[1].join(5)
        self.assertFalse(threads[1].is_alive())
        self.assertLess(time.monotonic() - started, 2.5)  # well before its 3 s limit
        self.assertEqual(results["stop"]["outcome"], "signaled")
        self.assertEqual(results["stop"]["client_ref"], "stop")
        threads[0].join(10)
        # Control: the run not cancelled ran to its limit.
        self.assertTrue(results["keep"]["report"]["timed_out"])
        self.assertEqual(t.cancel("nobody")["cancelled_runs"], [])

    def test_denied_read_is_reported(self):
        t = self.task(["cat"])
        self.assertTrue(os.access("/etc/passwd", os.R_OK))  # control: readable unconfined
        r = t.exec("cat", ["cat", "/etc/passwd"])
        self.assertEqual(r["exit_status"], 1)
        self.assertEqual(r["stdout"], "")
        self.assertIn("Permission denied", r["stderr"])
        # Landlock's denial of the open, explained: the default decided, and
        # no grant can allow what cat's own rules do not.
        opens = [d for d in r["denials"]
                 if d.get("layer") == "landlock" and d.get("op") == "file_open" and d.get("object") == "/etc/passwd"]
        self.assertEqual(len(opens), 1, r["denials"])
        self.assertEqual(opens[0]["rule"], "the default")
        self.assertIn("no rule allows read on /etc/passwd", opens[0]["explanation"])
        self.assertIsNone(opens[0]["grant_would_allow"])
        judged = self.api.judge("cat", {"op": "open", "path": "/etc/shadow", "access": "read"})
        self.assertEqual(judged["verdict"], "deny")
        # Learning mode: the proposal names exactly that file, and under it the
        # recorded open is allowed.
        p = self.api.propose("cat", task=t.id)
        self.assertIn('files:\n  read:\n    - /etc/passwd\n', p["rules"])
        self.assertGreaterEqual(p["allowed_by_proposal"], 1)
        self.assertEqual(p["still_refused"], [])

    def test_typed_errors_carry_the_error_body(self):
        with self.assertRaises(bc.NotFound) as nf:
            self.api.create_task(["nosuch"])
        self.assertEqual(nf.exception.code, "unknown_tool")
        self.assertIn("nosuch", nf.exception.message)
        self.assertEqual(nf.exception.error["code"], "unknown_tool")

        with self.assertRaises(bc.GrantWidens) as gw:
            self.api.create_task(["cat"], grant={"files": [{"path": "/etc", "rights": ["read"]}]})
        self.assertIsInstance(gw.exception, bc.Forbidden)
        self.assertEqual(gw.exception.status, 403)
        self.assertTrue(gw.exception.reasons)
        self.assertTrue(gw.exception.reasons[0].startswith("cat: "))
        self.assertIn(gw.exception.reasons[0], str(gw.exception))

        with self.assertRaises(bc.BadRequest) as br:
            self.api.create_task(["cat"], grant={"files": [{"path": "${workdir}", "rights": ["wrte"]}]})
        self.assertIn("grant.files[0].rights[0]", br.exception.message)

        t = self.task(["cat"])
        with self.assertRaises(bc.Unprocessable) as un:
            t.exec("cat", ["cat", "x"], files={"/etc/x": "no"})
        self.assertEqual(un.exception.code, "file_refused")
        self.assertTrue(un.exception.message.startswith("files./etc/x: "))
        self.assertFalse(os.path.exists("/etc/x"))

        with self.assertRaises(bc.NotFound):
            self.api.task(999999)
        # A tool no profile narrowed, and one that keeps no profile (the
        # shipped tools keep none): each named in its own error.
        with self.assertRaises(bc.NotFound) as nn:
            t.lift_narrowing("cat")
        self.assertEqual(nn.exception.code, "not_narrowed")
        self.assertIn("no profile narrowed cat in task", nn.exception.message)
        with self.assertRaises(bc.NotFound) as np:
            self.api.profile("cat", task=t.id)
        self.assertEqual(np.exception.code, "unknown_profile")
        self.assertEqual(self.api.profiles(), [])
        t.close()
        with self.assertRaises(bc.Conflict) as closed:
            t.exec("cat", ["cat", "x"])
        self.assertEqual(closed.exception.code, "task_closed")

    def test_time_boxed_grant_and_audit_paging(self):
        t = self.task(["sh"], grant={"files": [{"path": "${workdir}/out", "rights": ["create", "write"]}]})
        g = t.update_grant({"files": [{"path": "${workdir}", "rights": ["create", "write"]}]}, expires_in_ms=60000)
        self.assertEqual(g["epoch"], 2)
        self.assertIsInstance(g["expires_ns"], int)
        r = t.exec("sh", ["sh", "-c", "echo x > top.txt"])
        self.assertEqual(r["exit_status"], 0)
        back = t.update_grant({"files": [{"path": "${workdir}/out", "rights": ["create", "write"]}]})
        self.assertEqual(back["epoch"], 3)
        r = t.exec("sh", ["sh", "-c", "echo y > top2.txt"])
        self.assertNotEqual(r["exit_status"], 0)

        one_page = self.api.audit_page(task=t.id, limit=1000)["rows"]
        paged = list(self.api.audit(task=t.id, limit=1))  # one record per page
        self.assertGreaterEqual(len(paged), 7)  # 3 epochs, 2 runs x (start, exit)
        self.assertEqual([r["seq"] for r in paged], [r["seq"] for r in one_page])
        self.assertEqual(sorted(r["seq"] for r in paged), [r["seq"] for r in paged])
        kinds = {r["kind"] for r in paged}
        self.assertTrue({"policy_epoch", "run_start", "run_exit"} <= kinds)
        self.assertTrue(all(r["task_id"] == t.id for r in paged))


if __name__ == "__main__":
    unittest.main()
