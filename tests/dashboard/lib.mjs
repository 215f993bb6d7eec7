// Shared by the dashboard tiers: a real `agentd serve` with its own state
// directory, unix socket and loopback port; the API through its token; a
// tiny check/report harness (a failed check does not stop the run, so every
// later step still runs and leaves its screenshot; the exit code says).
import { spawn } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync, rmdirSync, existsSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const AGENTD = process.env.AGENTD_BINARY;
export const RULES = process.env.BULWARK_RULES_DIR;
// The built page agentd serves; unset: agentd's default (installed, else the
// build tree's dashboards/web/dist).
export const ASSETS = process.env.DASHBOARD_ASSETS;

export function skip(reason) {
  console.log(`SKIP: ${reason}`);
  process.exit(77);
}

let passed = 0;
const failures = [];
export function check(ok, what, detail = "") {
  if (ok) {
    passed++;
    console.log(`  ok   ${what}`);
  } else {
    failures.push(what);
    console.log(`  FAIL ${what}${detail ? "\n       " + String(detail).split("\n").join("\n       ") : ""}`);
  }
  return ok;
}
export function finish() {
  console.log(`\n${passed} passed, ${failures.length} failed`);
  for (const f of failures) console.log(`failed: ${f}`);
  return failures.length ? 1 : 0;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A BPF pin root and cgroup parent of this daemon alone (tests/support/
// daemon.h PrivateBpf): with the shared ones, a daemon of a tier running in
// parallel may read this one's monitor events.
function privateBpf(name) {
  let mnt = null;
  for (const line of readFileSync("/proc/self/mountinfo", "utf8").split("\n")) {
    const [pre, post] = line.split(" - ");
    if (post?.startsWith("cgroup2 ")) mnt = pre.split(" ")[4];
  }
  const own = readFileSync("/proc/self/cgroup", "utf8").split("\n").find((l) => l.startsWith("0::"))?.slice(3);
  if (!mnt || own === undefined) throw new Error("no cgroup v2 mount or own cgroup for a private BPF parent");
  const leaf = `dashboard-${name}-${process.pid}`;
  const pin = `/sys/fs/bpf/${leaf}`;
  const parent = `${mnt}${own === "/" ? "" : own}/${leaf}`;
  return {
    args: ["--bpf-pin-root", pin, "--bpf-cgroup-parent", parent],
    remove() {
      rmSync(pin, { recursive: true, force: true });
      try { rmdirSync(parent); } catch { /* gone, or runs left (agentd reaps them) */ }
    },
  };
}

// Each daemon has a BPF pin root and cgroup parent of its own (privateBpf)
// unless opts.privateBpf is false.
// opts.config: YAML text for --config (then no --http is passed: the
// listener comes from the config); opts.expectDashboard false: wait for the
// unix socket instead of the printed dashboard address; opts.rules: the rules
// directory (default $BULWARK_RULES_DIR).
export async function startAgentd(port, name, opts = {}) {
  if (!AGENTD || !existsSync(AGENTD)) throw new Error(`AGENTD_BINARY not set or missing: ${AGENTD}`);
  const dir = mkdtempSync(join(tmpdir(), `dashboard-${name}-`));
  chmodSync(dir, 0o711); // the sandbox uid must reach the task work directories
  const args = ["serve", "--state-dir", join(dir, "state"), "--socket", join(dir, "agentd.sock"), "--work-root",
    join(dir, "work"), "--log-level", "warn"];
  if (opts.config !== undefined) {
    writeFileSync(join(dir, "agentd.yaml"), opts.config);
    args.push("--config", join(dir, "agentd.yaml"));
  } else {
    args.push("--http", `127.0.0.1:${port}`);
  }
  const rules = opts.rules ?? RULES;
  if (rules) args.push("--rules", rules);
  if (ASSETS) args.push("--dashboard-assets", ASSETS);
  const bpf = opts.privateBpf === false ? null : privateBpf(name);
  if (bpf) args.push(...bpf.args);
  const child = spawn(AGENTD, args, { stdio: ["ignore", "pipe", "pipe"] });
  let out = "", err = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (err += d));
  const exited = new Promise((r) => child.on("exit", (code, sig) => r({ code, sig })));
  const deadline = Date.now() + 30000;
  let url = null;
  const sock = join(dir, "agentd.sock");
  while (Date.now() < deadline) {
    const m = /dashboard: (http:\/\/\S+)/.exec(out);
    if (m) { url = m[1]; break; }
    if (opts.expectDashboard === false && existsSync(sock) && (await unixGet(sock, "/v1/health").catch(() => null))?.status === 200) break;
    if (child.exitCode !== null) break;
    await sleep(50);
  }
  if (opts.expectDashboard === false) {
    return {
      dir, out: () => out, log: () => err, sock, child,
      unixGet: (path) => unixGet(sock, path),
      async stop() {
        if (child.exitCode === null) { child.kill("SIGTERM"); await exited; }
        rmSync(dir, { recursive: true, force: true });
        bpf?.remove();
      },
    };
  }
  if (!url) {
    child.kill("SIGKILL");
    bpf?.remove();
    throw new Error(`agentd did not print its dashboard address\nstdout: ${out}\nstderr: ${err}`);
  }
  const token = /#token=([0-9a-f]+)/.exec(url)[1];
  const base = `http://127.0.0.1:${port}`;
  const d = {
    dir, url, token, base, child,
    log: () => err,
    async call(method, path, body, tok = token) {
      const headers = {};
      if (tok !== null) headers.Authorization = `Bearer ${tok}`;
      if (body !== undefined) headers["Content-Type"] = "application/json";
      const r = await fetch(base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
      const text = await r.text();
      let json = null;
      try { json = JSON.parse(text); } catch { /* not JSON */ }
      return { status: r.status, headers: r.headers, text, json };
    },
    async stop() {
      if (child.exitCode === null) {
        child.kill("SIGTERM");
        const t = setTimeout(() => child.kill("SIGKILL"), 15000);
        await exited;
        clearTimeout(t);
      }
      rmSync(dir, { recursive: true, force: true });
      bpf?.remove();
    },
    tokenFile: () => readFileSync(join(dir, "state", "dashboard.token"), "utf8").trim(),
  };
  return d;
}

// GET over the unix socket (root is an allowed peer).
export function unixGet(socketPath, path) {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, path, headers: { Host: "agentd" } }, (res) => {
      let body = "";
      res.on("data", (d) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode, body }));
    });
    req.on("error", reject);
    req.setTimeout(5000, () => req.destroy(new Error("timeout")));
    req.end();
  });
}
