#!/usr/bin/env python3
"""OCI runtime tier: bulwark-oci under real container engines (runc and crun
as delegates, podman with --runtime, containerd 1.6 through `ctr run` with
the runc shim pointed at it), a real `agentd serve` binding the containers'
cgroups, root filesystems built here from the host's programs (and busybox-static)
with its libraries (no registry is reachable).

Every confinement claim is an attempt that must fail next to an unconfined
control (the same container without the annotation) that shows it works:

  network   a container under a curl policy reaches its allowed address and
            not another port (runc, crun, podman, ctr); its denial lands in
            agentd's store with the container's id (and the pod's identity
            when the engine names it)
  files     a denied read and a write below a deny mask fail
  exec      a process exec'd into a running container is confined the same
            way (runc exec with words, with --process, podman exec); --cap refused
  lifecycle kill and delete leave no cgroup, binding, state or process
  restart   agentd killed with -9 while a container runs: the container stays
            confined while no agentd runs, the next agentd re-adopts it, its
            later decisions carry its run again, its delete records the exit
  refusals  a bad annotation, a widening grant and (without BPF LSM) a rule
            no layer in force holds fail `create` with the reason, leaving no
            container, cgroup or state behind; unannotated: refuse
  supervisor the launcher's checks before the tool's first instruction: a
            command that is none of the policy's binaries, a binary without
            a property `hardening:` requires (busybox-static is not PIE), the
            engine's environment filtered by `environment:`; a `mandatory:`
            layer not in force here refuses create; the launcher's refusal
            and the tool's status reach the container's exit record

    oci_test.py AGENTD BULWARK_OCI LAUNCHER RULES_DIR
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from oci_env import Env, serve  # noqa: E402

failures: list[str] = []


def check(ok: bool, what: str) -> bool:
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)
    return ok


RULES = {
    # curl to one loopback port (the allowed server); bind refused (host netns)
    "ocicurl": """\
tool: ocicurl
description: curl to one loopback port, in a container
extends: [base/network-client, base/curl-runtime]
binaries: [/usr/bin/curl]
files:
  read:   ["${workdir}"]
  write:  ["${workdir}"]
  create: ["${workdir}"]
exec:
  allow: [/usr/bin/curl]
network:
  connect:
    - { cidr: 127.0.0.1/32, ports: [PORT_OK], proto: tcp }
syscalls:
  deny: [bind]
""",
    # sh in its work directory; .git below it is not the tool's to change
    "ocish": """\
tool: ocish
description: sh and cat in the work directory of a container
extends: [base/minimal]
binaries: [/usr/bin/dash]
files:
  read: ["${workdir}"]
  write: ["${workdir}"]
  create: ["${workdir}"]
  deny:
    - { path: "${workdir}/.git", rights: [write, create, remove] }
exec:
  allow: [/usr/bin/dash, /usr/bin/cat]
""",
    # sleep, sh, cat and curl to one loopback port: the long-lived container
    # that processes are exec'd into
    "ocibox": """\
tool: ocibox
description: sleep, sh, cat and curl to one loopback port, in a container
extends: [base/network-client, base/curl-runtime]
binaries: [/usr/bin/curl, /usr/bin/sleep, /usr/bin/dash, /usr/bin/cat]
files:
  read:   ["${workdir}"]
  write:  ["${workdir}"]
  create: ["${workdir}"]
exec:
  allow: [/usr/bin/curl, /usr/bin/sleep, /usr/bin/dash, /usr/bin/cat]
network:
  connect:
    - { cidr: 127.0.0.1/32, ports: [PORT_OK], proto: tcp }
syscalls:
  deny: [bind]
""",
    # busybox-static (not PIE) under the floor's hardening, and a control
    # rule that asks only for NX of it
    "ocibb": """\
tool: ocibb
description: busybox, which base/minimal's hardening refuses
extends: [base/minimal]
binaries: [/usr/bin/busybox]
files:
  read: ["${workdir}"]
exec:
  allow: [/usr/bin/busybox]
""",
    "ocibbnx": """\
tool: ocibbnx
description: busybox with only NX required of it
binaries: [/usr/bin/busybox]
files:
  read: ["${workdir}"]
exec:
  allow: [/usr/bin/busybox]
hardening:
  require: [nx]
""",
    # a layer this host cannot have, made mandatory; and one it has
    "ocilsm": """\
tool: ocilsm
description: sh, only where the BPF LSM is in force
extends: [base/minimal]
mandatory: [bpf-lsm]
binaries: [/usr/bin/dash]
exec:
  allow: [/usr/bin/dash]
""",
    "ociseccomp": """\
tool: ociseccomp
description: sh, only where seccomp and Landlock are in force
extends: [base/minimal]
mandatory: [seccomp, landlock]
binaries: [/usr/bin/dash]
exec:
  allow: [/usr/bin/dash]
""",
    # a rule only the BPF LSM holds (an abstract unix bind of its own)
    "ocibind": """\
tool: ocibind
description: binds an abstract unix name
extends: [base/minimal]
binaries: [/usr/bin/dash]
files:
  read: ["${workdir}"]
exec:
  allow: [/usr/bin/dash]
network:
  families: [unix]
  unix:
    bind: ["@ocibind-worker"]
""",
}


def curl_args(port: int) -> list[str]:
    return ["curl", "-s", "-m", "5", f"http://127.0.0.1:{port}/"]


def container_of(row: sqlite3.Row) -> dict:
    return json.loads(row["detail"] or "{}").get("container", {})


def denied_connects(env: Env, port: int, since_seq: int, container: str | None = None) -> list[sqlite3.Row]:
    """Refused connects to `port` after since_seq; with `container`, waits for one of its."""
    until = None if container is None else (lambda rows: any(container_of(x).get("id") == container for x in rows))
    return env.records(f"seq > {since_seq} AND kind = 1 AND decision = 1 AND object LIKE '%:{port}%'", until)


def last_seq(env: Env) -> int:
    rows = env.records("1=1")
    return rows[-1]["seq"] if rows else 0


def case_network_runc(env: Env, delegate: str, config: str) -> None:
    seq = last_seq(env)
    b = env.bundle(f"net-{delegate}-probe", ["true"], None)
    r = env.oci("run", "--bundle", b, f"net-{delegate}-probe", config=config)
    if r.returncode != 0 and "hybrid mode not supported" in r.stderr:
        # crun refuses any container, confined or not, where the cgroup v2
        # hierarchy of a hybrid host still has controllers (this host's has hugetlb)
        print(f"SKIP {delegate}: it cannot run any container on this host: {r.stderr.strip()[-200:]}", flush=True)
        return
    b = env.bundle(f"net-{delegate}-ok", curl_args(env.port_ok), "ocicurl")
    r = env.oci("run", "--bundle", b, f"net-{delegate}-ok", config=config)
    check(r.returncode == 0 and f"served by {env.port_ok}" in r.stdout,
          f"{delegate}: the curl policy reaches its allowed address (rc {r.returncode}: {r.stdout.strip()} {r.stderr.strip()[-300:]})")
    b = env.bundle(f"net-{delegate}-other", curl_args(env.port_other), "ocicurl")
    r = env.oci("run", "--bundle", b, f"net-{delegate}-other", config=config)
    check(r.returncode == 7 and "served by" not in r.stdout,
          f"{delegate}: the curl policy does not reach another port (rc {r.returncode}, curl's 7: could not connect)")
    rows = denied_connects(env, env.port_other, seq, f"net-{delegate}-other")
    check(any(container_of(x).get("id") == f"net-{delegate}-other" for x in rows),
          f"{delegate}: the refused connect is in agentd's store with the container's id ({len(rows)} record(s))")
    b = env.bundle(f"net-{delegate}-control", curl_args(env.port_other), None)
    r = env.oci("run", "--bundle", b, f"net-{delegate}-control", config=config)
    check(r.returncode == 0 and f"served by {env.port_other}" in r.stdout,
          f"{delegate}: control: the same container without the annotation reaches that port (rc {r.returncode})")


def case_files(env: Env) -> None:
    script = ("cat /etc/secret; echo rc_read=$?; echo x > /work/.git/config; echo rc_mask=$?; "
              "echo ok > /work/note && cat /work/note")
    os.makedirs(os.path.join(env.rootfs, "work/.git"), exist_ok=True)
    b = env.bundle("files", ["sh", "-c", script], "ocish", host_net=False)
    r = env.oci("run", "--bundle", b, "files")
    out = r.stdout
    check("rc_read=1" in out and "not for tools" not in out, f"files: a path no rule grants is not readable ({out.strip()})")
    check("rc_mask=" in out and "rc_mask=0" not in out and
          not os.path.exists(os.path.join(env.rootfs, "work/.git/config")),
          f"files: a write below the deny mask ${{workdir}}/.git fails ({r.stderr.strip()[-120:]})")
    check(out.strip().endswith("ok"), "files: the work directory is the tool's")
    b = env.bundle("files-control", ["sh", "-c", script], None, host_net=False)
    r = env.oci("run", "--bundle", b, "files-control")
    check("not for tools" in r.stdout and "rc_mask=0" in r.stdout,
          "files: control: without the annotation both the read and the write succeed")
    shutil.rmtree(os.path.join(env.rootfs, "work/.git"), ignore_errors=True)
    for f in ("note",):
        try:
            os.unlink(os.path.join(env.rootfs, "work", f))
        except OSError:
            pass


def container_cgroup(env: Env, cid: str) -> str:
    return os.path.join(env.cgroup_parent, "oci-" + cid)


def case_exec_restart_lifecycle(env: Env) -> None:
    cid = "long"
    b = env.bundle(cid, ["sleep", "300"], "ocibox")
    r = env.oci("create", "--bundle", b, cid)
    if not check(r.returncode == 0, f"lifecycle: create ({r.stderr.strip()[-300:]})"):
        return
    check(os.path.isdir(container_cgroup(env, cid)), "lifecycle: the container's cgroup is below agentd's BPF parent")
    r = env.oci("start", cid)
    check(r.returncode == 0, "lifecycle: start")
    # the unconfined control: the same container without the annotation
    ctl = env.bundle("long-control", ["sleep", "300"], None)
    env.oci("create", "--bundle", ctl, "long-control")
    env.oci("start", "long-control")
    r = env.oci("exec", "long-control", "cat", "/etc/secret")
    check("not for tools" in r.stdout, "exec: control: exec'd into an unannotated container, cat reads /etc/secret")
    r = env.oci("exec", "long-control", *curl_args(env.port_other))
    check(f"served by {env.port_other}" in r.stdout, "exec: control: ... and curl reaches the other port")
    env.oci("kill", "long-control", "KILL")
    time.sleep(0.3)
    env.oci("delete", "--force", "long-control")

    seq = last_seq(env)
    r = env.oci("exec", cid, *curl_args(env.port_ok))
    check(r.returncode == 0 and f"served by {env.port_ok}" in r.stdout, f"exec: words: an exec'd curl reaches the allowed port (rc {r.returncode}: {r.stderr.strip()[-200:]})")
    r = env.oci("exec", cid, *curl_args(env.port_other))
    check(r.returncode == 7, f"exec: words: ... and not the other (rc {r.returncode})")
    proc_file = os.path.join(env.dir, "process.json")
    with open(proc_file, "w") as f:
        json.dump({"terminal": False, "user": {"uid": 0, "gid": 0}, "args": ["cat", "/etc/secret"],
                   "env": ["PATH=/usr/bin:/bin"], "cwd": "/work"}, f)
    r = env.oci("exec", "--process", proc_file, cid)
    check(r.returncode == 1 and "not for tools" not in r.stdout and "ermission denied" in r.stderr,
          f"exec: --process: cat cannot read /etc/secret (rc {r.returncode}: {r.stderr.strip()[-200:]})")
    r = env.oci("exec", "--cap", "CAP_SYS_ADMIN", cid, "id")
    check(r.returncode != 0 and "capabilit" in r.stderr, "exec: --cap is refused")
    rows = denied_connects(env, env.port_other, seq, cid)
    check(any(container_of(x).get("id") == cid for x in rows),
          "exec: the exec'd process's denials carry the container's id")

    # agentd killed with -9: the container stays confined; the next agentd re-adopts it
    status, listed = env.api("GET", "/v1/containers")
    run_id = next((c["run_id"] for c in (listed or []) if c["id"] == cid), None)
    env.proc.send_signal(signal.SIGKILL)
    env.proc.wait()
    r = env.oci("exec", cid, *curl_args(env.port_other))
    check(r.returncode == 7, "restart: with no agentd running the container is still confined (pinned programs and binding)")
    r = env.oci("exec", cid, *curl_args(env.port_ok))
    check(r.returncode == 0 and f"served by {env.port_ok}" in r.stdout, "restart: ... and still reaches its allowed port")
    env.start_agentd()
    check(f"containers: {cid} (run {run_id}" in env.log_text() and "re-adopted" in env.log_text(),
          "restart: the next agentd re-adopts the container")
    status, listed = env.api("GET", "/v1/containers")
    check(any(c["id"] == cid and c["run_id"] == run_id for c in (listed or [])), "restart: GET /v1/containers lists it")
    seq = last_seq(env)
    r = env.oci("exec", cid, *curl_args(env.port_other))
    rows = env.records(f"seq > {seq} AND kind = 1 AND decision = 1 AND run_id = {run_id}",
                       lambda rows: any(container_of(x).get("id") == cid for x in rows))
    check(r.returncode != 0 and any(container_of(x).get("id") == cid for x in rows),
          "restart: its later denials carry its run and id again")
    open_runs = env.records(f"run_id = {run_id} AND kind = 3")
    check(not open_runs, "restart: reconciliation left the container's run open (it lives on)")

    # kill and delete leave nothing behind
    pids = open(os.path.join(container_cgroup(env, cid), "cgroup.procs")).read().split()
    env.oci("kill", cid, "KILL")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and env.oci("state", cid).stdout.find('"stopped"') < 0:
        time.sleep(0.1)
    r = env.oci("delete", cid)
    check(r.returncode == 0, f"lifecycle: delete ({r.stderr.strip()[-200:]})")
    check(not os.path.exists(container_cgroup(env, cid)), "lifecycle: no cgroup left")
    check(not os.path.exists(os.path.join(env.dir, "oci-state", cid)), "lifecycle: no runtime state left")
    def alive(pid: str) -> bool:  # a zombie is dead, waiting for whoever reaps orphans here
        try:
            return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False
    check(not any(alive(p) for p in pids), f"lifecycle: no process left ({pids})")
    status, listed = env.api("GET", "/v1/containers")
    check(status == 200 and not any(c["id"] == cid for c in listed), "lifecycle: agentd holds no binding")
    exits = env.records(f"run_id = {run_id} AND kind = 3")
    check(len(exits) == 1 and json.loads(exits[0]["detail"]).get("outcome") == "deleted", "lifecycle: the exit is recorded")


def leaves_nothing(env: Env, cid: str) -> bool:
    gone = env.oci("state", cid).returncode != 0
    return gone and not os.path.exists(container_cgroup(env, cid)) and \
        not os.path.exists(os.path.join(env.dir, "oci-state", cid))


def exit_record(env: Env, cid: str) -> dict:
    """The detail of the exit record agentd keeps for container `cid`."""
    for row in reversed(env.records("kind = 3")):
        detail = json.loads(row["detail"] or "{}")
        if detail.get("container", {}).get("id") == cid:
            return detail
    return {}


def check_lsm_verdict(env: Env, cid: str, r: subprocess.CompletedProcess, held: str, refusal_named: bool,
                      refused: str) -> None:
    """A create that only the BPF LSM can let through: it succeeds where the
    LSM is in force (the container deleted again); elsewhere it fails with
    the reason `refusal_named` checked, leaving nothing behind."""
    status, health = env.api("GET", "/v1/health")
    lsm = (health or {}).get("host", {}).get("layers", {}).get("bpf_lsm", {}) if isinstance(health, dict) else {}
    if isinstance(lsm, dict) and lsm.get("state") == "enforcing":
        check(r.returncode == 0, held)
        env.oci("delete", "--force", cid)
    else:
        check(r.returncode != 0 and refusal_named and leaves_nothing(env, cid), f"{refused} ({r.stderr.strip()[-300:]})")


def case_refusals(env: Env) -> None:
    b = env.bundle("bad-tool", ["id"], "../etc/passwd")
    r = env.oci("create", "--bundle", b, "bad-tool")
    check(r.returncode != 0 and "org.bulwark.tool" in r.stderr and leaves_nothing(env, "bad-tool"),
          f"refusal: a bad annotation: create fails naming it, nothing starts ({r.stderr.strip()[-200:]})")
    b = env.bundle("no-tool", ["id"], "nosuchtool")
    r = env.oci("create", "--bundle", b, "no-tool")
    check(r.returncode != 0 and "no rule file" in r.stderr and leaves_nothing(env, "no-tool"),
          "refusal: an unknown tool: create fails, nothing starts")
    b = env.bundle("wide-grant", ["id"], "ocish",
                   extra_annotations={"org.bulwark.grant": json.dumps({"files": [{"path": "/etc", "rights": ["read"]}]})})
    r = env.oci("create", "--bundle", b, "wide-grant")
    check(r.returncode != 0 and "more than the tool's rules allow" in r.stderr and leaves_nothing(env, "wide-grant"),
          f"refusal: a grant that widens the rules ({r.stderr.strip()[-200:]})")
    r = env.oci("create", "--bundle", env.bundle("unheld", ["id"], "ocibind"), "unheld")
    check_lsm_verdict(env, "unheld", r, "refusal: with the BPF LSM a unix bind rule is held",
                      "ocibind.yaml:" in r.stderr and "network.unix" in r.stderr,
                      "refusal: a rule no layer in force holds refuses create, naming file:line")
    status, listed = env.api("GET", "/v1/containers")
    check(status == 200 and not any(c["id"] in ("unheld", "wide-grant") for c in listed),
          "refusal: agentd holds no binding of a refused container")
    refuse = env.write_config("refuse", "/usr/sbin/runc", unannotated="refuse")
    b = env.bundle("plain", ["id"], None)
    r = env.oci("create", "--bundle", b, "plain", config=refuse)
    check(r.returncode != 0 and "unannotated: refuse" in r.stderr and leaves_nothing(env, "plain"),
          "unannotated: refuse: a container naming no policy is refused")
    log = os.path.join(env.dir, "runc.log")
    subprocess.run([env.oci_bin, "--root", env.runc_root, "--bulwark-config", env.config, "--log", log, "--log-format",
                    "json", "create", "--bundle", env.bundle("logged", ["id"], "nosuchtool"), "logged"],
                   capture_output=True)
    lines = [json.loads(x) for x in open(log).read().splitlines() if x.strip()] if os.path.exists(log) else []
    check(any(x.get("level") == "error" and "no rule file" in x.get("msg", "") for x in lines),
          "errors reach runc's --log file in its json format (where containerd and conmon read them)")


def case_supervisor(env: Env) -> None:
    with open(os.path.join(env.rootfs, "work", "hello"), "w") as f:
        f.write("hello from work\n")
    # binaries: the command must be one of the policy's
    r = env.oci("run", "--bundle", env.bundle("bin-other", ["cat", "/work/hello"], "ocish", host_net=False), "bin-other")
    check(r.returncode == 126 and "hello from work" not in r.stdout and "/usr/bin/cat is not one of the policy's binaries" in r.stderr,
          f"supervisor: a command that is none of the policy's binaries does not start (rc {r.returncode}: {r.stderr.strip()[-200:]})")
    r = env.oci("run", "--bundle", env.bundle("bin-listed", ["sh", "-c", "cat /work/hello"], "ocish", host_net=False),
                "bin-listed")
    check(r.returncode == 0 and "hello from work" in r.stdout,
          f"supervisor: control: its listed binary (sh -> dash) starts and runs cat (rc {r.returncode}: {r.stderr.strip()[-200:]})")
    ends = {cid: exit_record(env, cid) for cid in ("bin-other", "bin-listed")}
    check(ends["bin-other"].get("code") == 126 and
          "not one of the policy's binaries" in ends["bin-other"].get("launcher_refused", ""),
          f"supervisor: the refusal is in the container's exit record ({ends['bin-other']})")
    check(ends["bin-listed"].get("code") == 0 and "launcher_refused" not in ends["bin-listed"],
          f"supervisor: control: a tool that ran has its exit status there ({ends['bin-listed']})")
    r = env.oci("run", "--bundle", env.bundle("bin-control", ["cat", "/work/hello"], None, host_net=False), "bin-control")
    check(r.returncode == 0 and "hello from work" in r.stdout, "supervisor: control: unannotated, cat runs")
    # hardening: busybox-static is not PIE
    r = env.oci("run", "--bundle", env.bundle("hard-pie", ["busybox", "true"], "ocibb", host_net=False), "hard-pie")
    check(r.returncode == 126 and "pie" in r.stderr,
          f"supervisor: a binary without a required property (PIE) does not start (rc {r.returncode}: {r.stderr.strip()[-200:]})")
    r = env.oci("run", "--bundle", env.bundle("hard-nx", ["busybox", "echo", "nx-ok"], "ocibbnx", host_net=False), "hard-nx")
    check(r.returncode == 0 and "nx-ok" in r.stdout,
          f"supervisor: control: the same binary where only NX is required runs (rc {r.returncode}: {r.stderr.strip()[-200:]})")
    # environment: base/minimal starts from an empty environment
    script = 'echo "secret=[$BULWARK_TEST_SECRET] home=$HOME"'
    def with_env(name: str, tool: str | None) -> str:
        b = env.bundle(name, ["sh", "-c", script], tool, host_net=False)
        cfg = os.path.join(b, "config.json")
        with open(cfg) as f:
            spec = json.load(f)
        spec["process"]["env"].append("BULWARK_TEST_SECRET=s3cret")
        with open(cfg, "w") as f:
            json.dump(spec, f)
        return b
    r = env.oci("run", "--bundle", with_env("env", "ocish"), "env")
    check(r.returncode == 0 and "secret=[]" in r.stdout and "home=/work" in r.stdout,
          f"supervisor: the engine's environment is filtered by the rules' environment plan ({r.stdout.strip()})")
    r = env.oci("run", "--bundle", with_env("env-control", None), "env-control")
    check("secret=[s3cret]" in r.stdout, f"supervisor: control: unannotated, the variable reaches the process ({r.stdout.strip()})")
    # mandatory layers
    r = env.oci("create", "--bundle", env.bundle("mand-lsm", ["true"], "ocilsm", host_net=False), "mand-lsm")
    check_lsm_verdict(env, "mand-lsm", r, "supervisor: mandatory bpf-lsm is met where the BPF LSM is in force",
                      "ocilsm.yaml:" in r.stderr and "mandatory layer bpf-lsm" in r.stderr,
                      "supervisor: a mandatory layer not in force refuses create, naming the rule")
    r = env.oci("run", "--bundle", env.bundle("mand-ok", ["sh", "-c", "true"], "ociseccomp", host_net=False), "mand-ok")
    check(r.returncode == 0, f"supervisor: control: mandatory seccomp and landlock are met ({r.stderr.strip()[-200:]})")


def case_podman(env: Env) -> None:
    if not shutil.which("podman"):
        check(False, "podman is installed (scripts/install-deps.sh)")
        return
    base = ["podman", "--runtime", env.oci_bin, "--runtime-flag", f"bulwark-config={env.config}", "--cgroup-manager",
            "cgroupfs", "--root", os.path.join(env.dir, "podman-root"), "--runroot", os.path.join(env.dir, "podman-run")]
    # --ulimit: podman's defaults raise the open-files and process limits to
    # the host's ceiling, which runc cannot do from within the limits this
    # test runs under (without them the unconfined control fails)
    common = ["--rm", "--network", "host", "--workdir", "/work", "--env", "PATH=/usr/bin:/bin",
              "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024", "--rootfs", env.rootfs]
    ann = ["--annotation", "org.bulwark.tool=ocicurl"]
    r = subprocess.run(base + ["run", *ann, *common, *curl_args(env.port_ok)], capture_output=True, text=True, timeout=120)
    check(r.returncode == 0 and f"served by {env.port_ok}" in r.stdout,
          f"podman: the curl policy reaches its allowed address (rc {r.returncode}: {r.stderr.strip()[-300:]})")
    r = subprocess.run(base + ["run", *ann, *common, *curl_args(env.port_other)], capture_output=True, text=True, timeout=120)
    check(r.returncode == 7, f"podman: ... and not another port (rc {r.returncode})")
    r = subprocess.run(base + ["run", *common, *curl_args(env.port_other)], capture_output=True, text=True, timeout=120)
    check(r.returncode == 0 and f"served by {env.port_other}" in r.stdout,
          f"podman: control: unannotated, it reaches it (rc {r.returncode}: {r.stderr.strip()[-300:]})")
    # exec into a running container (conmon: runtime exec --process)
    r = subprocess.run(base + ["run", "-d", "--name", "bw-exec", "--annotation", "org.bulwark.tool=ocibox",
                               *common[1:], "sleep", "300"], capture_output=True, text=True, timeout=120)
    if check(r.returncode == 0, f"podman: run -d ({r.stderr.strip()[-200:]})"):
        r = subprocess.run(base + ["exec", "bw-exec", "sh", "-c", "echo alive"], capture_output=True, text=True, timeout=60)
        check(r.returncode == 0 and "alive" in r.stdout, f"podman exec: runs in the container ({r.stderr.strip()[-200:]})")
        r = subprocess.run(base + ["exec", "bw-exec", *curl_args(env.port_other)], capture_output=True, text=True, timeout=60)
        check(r.returncode == 7, f"podman exec: curl to the other port is refused (rc {r.returncode})")
        r = subprocess.run(base + ["exec", "bw-exec", "cat", "/etc/secret"], capture_output=True, text=True, timeout=60)
        check(r.returncode == 1 and "not for tools" not in r.stdout, f"podman exec: /etc/secret is not readable (rc {r.returncode})")
        subprocess.run(base + ["rm", "-f", "-t", "0", "bw-exec"], capture_output=True, timeout=60)
    status, listed = env.api("GET", "/v1/containers")
    check(status == 200 and listed == [], f"podman: every container's binding released ({listed})")
    check(not [d for d in os.listdir(env.cgroup_parent) if d.startswith("oci-")], "podman: no container cgroup left")


def case_ctr(env: Env) -> None:
    if not shutil.which("containerd"):
        check(False, "containerd is installed (scripts/install-deps.sh)")
        return
    d = os.path.join(env.dir, "containerd")
    os.makedirs(d)
    addr = os.path.join(d, "containerd.sock")
    with open(os.path.join(d, "config.toml"), "w") as f:
        f.write(f'version = 2\nroot = "{d}/root"\nstate = "{d}/state"\n[grpc]\n  address = "{addr}"\n'
                f'[plugins."io.containerd.grpc.v1.cri"]\n  disable_apparmor = true\n')
    envv = dict(os.environ, BULWARK_OCI_CONFIG=env.config)
    ctd = subprocess.Popen(["containerd", "--config", os.path.join(d, "config.toml")], env=envv,
                           stdout=open(os.path.join(d, "log"), "w"), stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not os.path.exists(addr):
            time.sleep(0.1)
        ctr = ["ctr", "--address", addr, "run", "--rm", "--net-host", "--runc-binary", env.oci_bin, "--cwd", "/work",
               "--env", "PATH=/usr/bin:/bin"]
        pod = ["--annotation", "io.kubernetes.cri.sandbox-name=agent-7", "--annotation",
               "io.kubernetes.cri.sandbox-namespace=agents", "--annotation",
               "io.kubernetes.cri.sandbox-uid=0b6f3c1e-1111-4e2f-9c55-7a1d2c3b4e5f"]
        seq = last_seq(env)
        r = subprocess.run(ctr + ["--annotation", "org.bulwark.tool=ocicurl", *pod, "--rootfs", env.rootfs, "c-ok",
                                  *curl_args(env.port_ok)], capture_output=True, text=True, timeout=120)
        check(r.returncode == 0 and f"served by {env.port_ok}" in r.stdout,
              f"ctr: the curl policy reaches its allowed address (rc {r.returncode}: {r.stderr.strip()[-300:]})")
        r = subprocess.run(ctr + ["--annotation", "org.bulwark.tool=ocicurl", *pod, "--rootfs", env.rootfs, "c-other",
                                  *curl_args(env.port_other)], capture_output=True, text=True, timeout=120)
        check(r.returncode == 7, f"ctr: ... and not another port (rc {r.returncode})")
        rows = denied_connects(env, env.port_other, seq, "c-other")
        who = [container_of(x) for x in rows]
        check(any(w.get("id") == "c-other" and w.get("pod_name") == "agent-7" and w.get("pod_namespace") == "agents"
                  and w.get("pod_uid", "").startswith("0b6f3c1e") for w in who),
              f"ctr: the denial names the container and its pod ({who[:1]})")
        r = subprocess.run(ctr + ["--rootfs", env.rootfs, "c-control", *curl_args(env.port_other)],
                           capture_output=True, text=True, timeout=120)
        check(r.returncode == 0 and f"served by {env.port_other}" in r.stdout, "ctr: control: unannotated, it reaches it")
        status, listed = env.api("GET", "/v1/containers")
        check(status == 200 and listed == [], f"ctr: every container's binding released ({listed})")
    finally:
        ctd.terminate()
        try:
            ctd.wait(timeout=15)
        except subprocess.TimeoutExpired:
            ctd.kill()
        subprocess.run(["umount", "-R", "-l", d], capture_output=True)


def main() -> int:
    if os.geteuid() != 0:
        print("SKIP: needs root")
        return 77
    if len(sys.argv) != 5:
        print(__doc__)
        return 2
    for tool in ("runc", "crun", "podman", "containerd", "ctr"):
        if not shutil.which(tool):
            print(f"missing {tool}: scripts/install-deps.sh installs it")
            return 1
    env = Env(*[os.path.abspath(a) for a in sys.argv[1:]], rules=RULES)
    servers = [serve(env.port_ok), serve(env.port_other)]
    try:
        env.start_agentd()
        case_network_runc(env, "runc", env.config)
        case_network_runc(env, "crun", env.write_config("crun", "/usr/bin/crun"))
        case_files(env)
        case_exec_restart_lifecycle(env)
        case_refusals(env)
        case_supervisor(env)
        case_podman(env)
        case_ctr(env)
    finally:
        for s in servers:
            s.shutdown()
        if failures:
            print("agentd log tail:\n" + env.log_text()[-3000:])
        env.cleanup()
    print(f"{len(failures)} failure(s)" if failures else "every OCI case held")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
