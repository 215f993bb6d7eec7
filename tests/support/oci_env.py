"""A real agentd and bulwark-oci for the OCI runtime tier and its benchmark:
root filesystems built from busybox-static and the host's binaries with
their libraries (no registry is reachable), a daemon with its own state,
socket, pin root and cgroup parent, bundles made with `runc spec`, the
runtime run with a configuration of the environment's own."""
from __future__ import annotations

import http.server
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import tempfile
import threading
import time

from bulwark_host import cgroup2_mount, own_cgroup


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Quiet(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        body = f"served by {self.server.server_port}\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


def serve(port: int) -> http.server.ThreadingHTTPServer:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), Quiet)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def ldd_closure(binary: str) -> list[str]:
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    libs = []
    for line in out.splitlines():
        parts = line.split()
        for p in parts:
            if p.startswith("/"):
                libs.append(p)
    return libs


def copy_into(root: str, path: str) -> None:
    """A file with the chain of symbolic links that leads to it, as on the
    host (the rootfs has Debian's merged /usr): Landlock judges the file a
    link resolves to, so the rules' paths hold in the container too."""
    p = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
    for _ in range(16):
        target = root + p
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.islink(p):
            if not os.path.exists(target):
                shutil.copy2(p, target)
            return
        if not os.path.lexists(target):
            os.symlink(os.readlink(p), target)
        nxt = os.path.join(os.path.dirname(p), os.readlink(p))
        p = os.path.join(os.path.realpath(os.path.dirname(nxt)), os.path.basename(nxt))


# The host's programs a container runs, with their libraries (PIE, as
# base/minimal's `hardening: require: [pie, nx]` wants of a tool).
HOST_PROGRAMS = ("/usr/bin/sh", "/usr/bin/cat", "/usr/bin/ls", "/usr/bin/sleep", "/usr/bin/id", "/usr/bin/mkdir",
                 "/usr/bin/touch", "/usr/bin/grep", "/usr/bin/true", "/usr/bin/env", "/usr/bin/curl")


def build_rootfs(root: str) -> None:
    """The host's shell, coreutils and curl with their libraries at their own
    paths (so the shipped runtime rules name them), busybox-static at
    /usr/bin/busybox (a program that is not PIE), a work directory."""
    for d in ("proc", "dev", "sys", "tmp", "work", "etc", "usr/bin", "usr/lib", "usr/lib64"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    for link in ("bin", "lib", "lib64"):  # merged /usr, as Debian 12
        os.symlink("usr/" + link, os.path.join(root, link))
    shutil.copy2("/bin/busybox", os.path.join(root, "usr/bin/busybox"))
    for program in HOST_PROGRAMS:
        copy_into(root, program)
        for lib in ldd_closure(program):
            copy_into(root, lib)
    for f in ("/etc/ld.so.cache", "/etc/nsswitch.conf", "/etc/hosts"):
        if os.path.exists(f):
            shutil.copy2(f, root + f)
    with open(os.path.join(root, "etc/passwd"), "w") as f:
        f.write("root:x:0:0:root:/root:/bin/sh\n")
    with open(os.path.join(root, "etc/secret"), "w") as f:
        f.write("not for tools\n")
    os.chmod(os.path.join(root, "tmp"), 0o1777)


class Env:
    def __init__(self, agentd: str, oci: str, launcher: str, shipped_rules: str, rules: dict[str, str],
                 prefix: str = "bulwark-oci"):
        self.agentd, self.oci_bin, self.launcher = agentd, oci, launcher
        self.dir = tempfile.mkdtemp(prefix=prefix + "-")
        os.chmod(self.dir, 0o711)
        self.rules = os.path.join(self.dir, "rules")
        shutil.copytree(os.path.join(shipped_rules, "base"), os.path.join(self.rules, "base"))
        self.port_ok, self.port_other = free_port(), free_port()
        for name, text in rules.items():
            with open(os.path.join(self.rules, name + ".yaml"), "w") as f:
                f.write(text.replace("PORT_OK", str(self.port_ok)))
        self.state = os.path.join(self.dir, "state")
        self.sock = os.path.join(self.dir, "agentd.sock")
        name = f"{prefix}-{os.getpid()}"
        self.pin_root = f"/sys/fs/bpf/{name}"
        self.cgroup_parent = cgroup2_mount() + own_cgroup().rstrip("/") + "/" + name
        self.rootfs = os.path.join(self.dir, "rootfs")
        build_rootfs(self.rootfs)
        self.runc_root = os.path.join(self.dir, "runc-root")
        self.config = self.write_config("runc", "/usr/sbin/runc")
        self.proc: subprocess.Popen | None = None
        self.logs = 0

    def write_config(self, name: str, delegate: str, unannotated: str = "run") -> str:
        path = os.path.join(self.dir, f"oci-{name}.yaml")
        with open(path, "w") as f:
            f.write(f"delegate: {delegate}\nrules_dir: {self.rules}\nagentd_socket: {self.sock}\n"
                    f"unannotated: {unannotated}\nstate_root: {self.dir}/oci-state\nlauncher: {self.launcher}\n")
        return path

    def start_agentd(self) -> None:
        self.logs += 1
        log = open(os.path.join(self.dir, f"agentd-{self.logs}.log"), "w")
        self.proc = subprocess.Popen(
            [self.agentd, "serve", "--state-dir", self.state, "--rules", self.rules, "--socket", self.sock,
             "--http", "off", "--work-root", os.path.join(self.dir, "work"), "--bpf-pin-root", self.pin_root,
             "--bpf-cgroup-parent", self.cgroup_parent],
            stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.api("GET", "/v1/health")[0] in (200, 503):
                return
            time.sleep(0.1)
        raise SystemExit("agentd did not come up: " + open(log.name).read()[-2000:])

    def log_text(self) -> str:
        return open(os.path.join(self.dir, f"agentd-{self.logs}.log")).read()

    def api(self, method: str, path: str) -> tuple[int, object]:
        try:
            out = subprocess.run(["curl", "-s", "-o", "-", "-w", "\n%{http_code}", "--unix-socket", self.sock,
                                  "-X", method, "http://agentd" + path], capture_output=True, text=True, timeout=10)
        except subprocess.TimeoutExpired:
            return 0, None
        body, _, code = out.stdout.rpartition("\n")
        try:
            return int(code or 0), json.loads(body) if body else None
        except json.JSONDecodeError:
            return int(code or 0), body

    def records(self, sql_where: str, until=None, within: float = 10.0) -> list[sqlite3.Row]:
        """The store's records matching sql_where: after 0.6 s (the BPF reader polls at
        200 ms; the store commits in batches), or, with `until`, as soon as until(rows)
        holds (at most `within` seconds: a loaded machine delays both)."""
        deadline = time.monotonic() + within
        while True:
            time.sleep(0.6 if until is None else 0.2)
            db = sqlite3.connect(f"file:{self.state}/audit.db?mode=ro", uri=True)
            db.row_factory = sqlite3.Row
            rows = db.execute("SELECT * FROM records WHERE " + sql_where + " ORDER BY seq").fetchall()
            db.close()
            if until is None or until(rows) or time.monotonic() > deadline:
                return rows

    def bundle(self, name: str, args: list[str], tool: str | None, host_net: bool = True,
               extra_annotations: dict | None = None, cwd: str = "/work") -> str:
        b = os.path.join(self.dir, "bundles", name)
        os.makedirs(b, exist_ok=True)
        subprocess.run(["runc", "spec", "--bundle", b], check=True)
        with open(os.path.join(b, "config.json")) as f:
            spec = json.load(f)
        spec["root"] = {"path": self.rootfs, "readonly": False}
        spec["process"]["terminal"] = False
        spec["process"]["args"] = args
        spec["process"]["cwd"] = cwd
        spec["process"]["env"] = ["PATH=/usr/bin:/bin", "HOME=/root"]
        if host_net:
            spec["linux"]["namespaces"] = [n for n in spec["linux"]["namespaces"] if n["type"] != "network"]
        ann = dict(extra_annotations or {})
        if tool:
            ann["org.bulwark.tool"] = tool
        spec["annotations"] = ann
        with open(os.path.join(b, "config.json"), "w") as f:
            json.dump(spec, f)
        return b

    def oci(self, *words: str, config: str | None = None, timeout: int = 60) -> subprocess.CompletedProcess:
        # Output through files, not pipes: a created container holds the
        # runtime's stdio until it ends.
        with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
            p = subprocess.run([self.oci_bin, "--root", self.runc_root, "--bulwark-config", config or self.config,
                                *words], stdout=out, stderr=err, timeout=timeout)
            out.seek(0)
            err.seek(0)
            return subprocess.CompletedProcess(p.args, p.returncode, out.read(), err.read())

    def cleanup(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        subprocess.run(["umount", "-l", self.pin_root], capture_output=True)
        shutil.rmtree(self.pin_root, ignore_errors=True)
        # A container a failed case left running: its processes killed first
        # (a cgroup with processes cannot be removed), then the tree bottom up.
        if os.path.exists(os.path.join(self.cgroup_parent, "cgroup.kill")):
            with open(os.path.join(self.cgroup_parent, "cgroup.kill"), "w") as f:
                f.write("1")
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and cgroup_populated(self.cgroup_parent):
                time.sleep(0.05)
        for dirpath, dirnames, _ in os.walk(self.cgroup_parent, topdown=False):
            for d in dirnames:
                try:
                    os.rmdir(os.path.join(dirpath, d))
                except OSError:
                    pass
        try:
            os.rmdir(self.cgroup_parent)
        except OSError:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)


def cgroup_populated(path: str) -> bool:
    try:
        with open(os.path.join(path, "cgroup.events")) as f:
            return "populated 1" in f.read()
    except OSError:
        return False
