// Tier otlp_export: a real `agentd serve` (its own state directory, socket,
// BPF pin root and cgroup parent; no TCP listener) exports its audit records
// to an OTLP/HTTP receiver in this process that decodes every request with
// the official OpenTelemetry protocol types (otlp_receiver.mjs). Checked:
//   - runs asked for with a W3C traceparent (the exec API's header, its body
//     field, MCP's _meta.traceparent): every record of the run arrives
//     exactly once, with the run's trace id and the caller's span id, its
//     OCSF class (File System Activity for a Landlock denial, Network
//     Activity for a refused connect, Process Activity for the run's start
//     and exit) and its rule, layer, decision and object;
//   - every record the store committed arrives exactly once, with the
//     daemon's resource attributes;
//   - a malformed traceparent is refused with 400 naming the field;
//   - a receiver answering 503 twice, then 200: the batch is sent again and
//     arrives once; retries counted in /metrics and /v1/health;
//   - a dead receiver: the runs and the store go on (records committed,
//     health ok), the records not exported are counted as dropped in
//     /metrics and /v1/health;
//   - both encodings: protobuf (first daemon), JSON (second daemon, set on
//     the command line).
//
// Environment: AGENTD, RULES_DIR. Exit 0 pass, 1 fail, 77 a requirement is
// missing (printed).
import { spawn, execFileSync } from "node:child_process";
import { once } from "node:events";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";

import { Receiver } from "./otlp_receiver.mjs";

const AGENTD = process.env.AGENTD;
const RULES_DIR = process.env.RULES_DIR;
if (process.getuid() !== 0) {
  console.log("otlp_export: privileged tier: needs root (agentd runs real sandboxes)");
  process.exit(77);
}
if (!AGENTD || !RULES_DIR) {
  console.error("otlp_export: set AGENTD and RULES_DIR");
  process.exit(1);
}

let passed = 0;
const failures = [];
function check(ok, what, detail = "") {
  if (ok) {
    passed++;
    console.log(`  ok   ${what}`);
  } else {
    failures.push(what);
    console.log(`  FAIL ${what}${detail ? "\n       " + String(detail).split("\n").join("\n       ") : ""}`);
  }
  return ok;
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const show = (g) => JSON.stringify(g, (k, v) => (typeof v === "bigint" ? `${v}n` : v));

function api(sock, method, target, body, headers = {}) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body);
    const req = http.request(
      {
        socketPath: sock,
        method,
        path: target,
        headers: {
          ...(data ? { "content-type": "application/json", "content-length": Buffer.byteLength(data) } : {}),
          ...headers,
        },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c) => (text += c));
        res.on("end", () => {
          let json = null;
          try {
            json = JSON.parse(text);
          } catch {}
          resolve({ status: res.statusCode, body: json, raw: text });
        });
      },
    );
    req.on("error", reject);
    if (data) req.write(data);
    req.end();
  });
}

function metric(text, name) {
  const line = text.split("\n").find((l) => l.startsWith(name + " "));
  return line === undefined ? undefined : Number(line.slice(name.length + 1));
}

// cgroup v2 mount and this process's cgroup, for a BPF cgroup parent of its own
function cgroupBase() {
  const mi = fs.readFileSync("/proc/self/mountinfo", "utf8").split("\n");
  let v2 = null;
  for (const l of mi) {
    const f = l.split(" ");
    const dash = f.indexOf("-");
    if (dash > 0 && f[dash + 1] === "cgroup2") {
      v2 = f[4];
      break;
    }
  }
  const own = fs.readFileSync("/proc/self/cgroup", "utf8").split("\n").find((l) => l.startsWith("0::"));
  return v2 && own ? v2 + own.slice(3).replace(/\/$/, "") : null;
}

// A real daemon with its own state directory, work root, socket, BPF pin
// root and cgroup parent; no TCP listener.
async function startDaemon(name, { config = "", args = [] } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `otlp-${name}-`));
  fs.chmodSync(dir, 0o711); // the sandbox uid must reach the task work directories
  const sock = path.join(dir, "agentd.sock");
  const tag = `bulwark-otlp-${name}-${process.pid}`;
  const pinRoot = `/sys/fs/bpf/${tag}`;
  const base = cgroupBase();
  const cgroupParent = base ? `${base}/${tag}` : null;
  fs.writeFileSync(path.join(dir, "agentd.yaml"), config);
  const log = fs.openSync(path.join(dir, "agentd.log"), "w");
  const bpf = cgroupParent ? ["--bpf-pin-root", pinRoot, "--bpf-cgroup-parent", cgroupParent] : ["--no-bpf"];
  const child = spawn(
    AGENTD,
    ["serve", "--config", path.join(dir, "agentd.yaml"), "--state-dir", path.join(dir, "state"), "--socket", sock,
     "--work-root", path.join(dir, "work"), "--http", "off", "--rules", RULES_DIR, ...bpf, ...args],
    { stdio: ["ignore", log, log] },
  );
  const d = { dir, sock, child, pinRoot, cgroupParent, log: () => fs.readFileSync(path.join(dir, "agentd.log"), "utf8") };
  for (let i = 0; i < 400; ++i) {
    await sleep(50);
    if (child.exitCode !== null) break;
    try {
      const r = await api(sock, "GET", "/v1/health");
      if (r.status === 200) return d;
    } catch {}
  }
  throw new Error("agentd serve did not come up:\n" + d.log());
}

async function stopDaemon(d) {
  let code = d.child.exitCode;
  if (code === null) {
    d.child.kill("SIGTERM");
    const r = await Promise.race([once(d.child, "exit"), sleep(20000).then(() => null)]);
    if (r === null) {
      d.child.kill("SIGKILL");
      await once(d.child, "exit");
    }
    code = d.child.exitCode;
  }
  fs.rmSync(d.pinRoot, { recursive: true, force: true });
  if (d.cgroupParent) try { fs.rmdirSync(d.cgroupParent); } catch {}
  if (failures.length) console.log(`--- agentd log (${d.dir}) ---\n${d.log().split("\n").slice(-40).join("\n")}`);
  fs.rmSync(d.dir, { recursive: true, force: true });
  return code;
}

// Every record the store holds, oldest first.
async function storeRecords(sock, query = "") {
  const out = [];
  let after = 0;
  for (;;) {
    const r = await api(sock, "GET", `/v1/audit?limit=1000&after_seq=${after}${query}`);
    if (r.status !== 200) throw new Error(`/v1/audit: ${r.status} ${r.raw}`);
    out.push(...r.body.rows);
    if (r.body.next_after_seq === undefined || r.body.next_after_seq === null) return out;
    after = r.body.next_after_seq;
  }
}

async function until(what, fn, ms = 20000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) return check(false, `within ${ms / 1000} s: ${what}`);
    await sleep(50);
  }
}

const bySeq = (receiver) => {
  const m = new Map();
  for (const r of receiver.records) if (r.seq !== undefined) m.set(r.seq, [...(m.get(r.seq) ?? []), r]);
  return m;
};

function traceparent() {
  const t = execFileSync("od", ["-An", "-tx1", "-N24", "/dev/urandom"]).toString().replace(/\s/g, "");
  return { text: `00-${t.slice(0, 32)}-${t.slice(32, 48)}-01`, traceId: t.slice(0, 32), spanId: t.slice(32, 48) };
}

// A run's records in the store, all arrived at the receiver exactly once,
// each with the run's trace. Returns the received records, by kind.
async function checkRun(d, receiver, reply, tp, what) {
  const runId = reply.run_id;
  const stored = await storeRecords(d.sock, `&run=${runId}`);
  const kinds = stored.map((r) => r.kind);
  check(kinds.includes("run_start") && kinds.includes("run_exit"), `${what}: the store has the run's start and exit`,
        kinds.join(","));
  await until(`${what}: the run's ${stored.length} records reach the receiver`, () => {
    const m = bySeq(receiver);
    return stored.every((r) => m.has(r.seq));
  });
  const m = bySeq(receiver);
  const dup = stored.filter((r) => (m.get(r.seq) ?? []).length !== 1).map((r) => `${r.seq}x${(m.get(r.seq) ?? []).length}`);
  check(dup.length === 0, `${what}: each of the run's ${stored.length} records arrived exactly once`, dup.join(" "));
  const got = stored.map((r) => (m.get(r.seq) ?? [])[0]).filter(Boolean);
  const wrongTrace = got.filter((g) => g.traceId !== tp.traceId || g.spanId !== tp.spanId || g.flags !== 1);
  check(wrongTrace.length === 0, `${what}: every record of the run carries the caller's trace id, span id and flags`,
        wrongTrace.map((g) => `${g.seq}: ${g.traceId}/${g.spanId}/${g.flags}`).join("\n"));
  for (const g of got) {
    const s = stored.find((r) => r.seq === g.seq);
    // (ts_ns past 2^53 reaches JSON.parse rounded: compared to the microsecond)
    if (g.attributes["bulwark.run_id"] !== BigInt(runId) || g.attributes["bulwark.kind"] !== s.kind ||
        Math.abs(Number(g.timeUnixNano) - s.ts_ns) > 1000 || g.attributes["bulwark.tool"] !== s.tool) {
      check(false, `${what}: record ${g.seq} is the store's`, `${show(g)}\nstore: ${JSON.stringify(s)}`);
    }
  }
  const start = got.find((g) => g.attributes["bulwark.kind"] === "run_start");
  const exit = got.find((g) => g.attributes["bulwark.kind"] === "run_exit");
  check(start && start.eventName === "bulwark.run_start" && start.attributes["ocsf.class_uid"] === 1007n &&
        start.attributes["ocsf.activity_id"] === 1n && start.attributes["ocsf.type_uid"] === 100701n,
        `${what}: the run's start is OCSF Process Activity: Launch (1007, 100701)`);
  check(start && JSON.parse(start.attributes["bulwark.detail"]).traceparent === tp.text,
        `${what}: the start record keeps the traceparent`);
  check(exit && exit.attributes["ocsf.class_uid"] === 1007n && exit.attributes["ocsf.activity_id"] === 2n,
        `${what}: the run's exit is OCSF Process Activity: Terminate`);
  return got;
}

function resourceOk(receiver) {
  const bad = receiver.records.filter((r) => r.resource["service.name"] !== "bulwark-agentd" ||
    r.resource["host.name"] !== os.hostname() || !r.resource["service.version"] || r.scope.name !== "bulwark.audit");
  return check(bad.length === 0 && receiver.records.length > 0,
               `all ${receiver.records.length} log records carry the resource (service.name bulwark-agentd, host.name, ` +
               `service.version) and the scope`, bad.slice(0, 3).map((r) => JSON.stringify(r.resource)).join("\n"));
}

async function everyStoreRecordOnce(d, receiver, what) {
  const stored = await storeRecords(d.sock);
  const last = stored.at(-1).seq;
  await until(`${what}: every committed record up to ${last} reaches the receiver`, () => {
    const m = bySeq(receiver);
    return stored.every((r) => m.has(r.seq));
  });
  const m = bySeq(receiver);
  const missing = stored.filter((r) => !m.has(r.seq)).map((r) => r.seq);
  const twice = [...m.entries()].filter(([, v]) => v.length > 1).map(([s]) => s);
  check(missing.length === 0 && twice.length === 0,
        `${what}: all ${stored.length} records the store committed arrived exactly once`,
        `missing ${missing.slice(0, 20)}; twice ${twice.slice(0, 20)}`);
}

// ---- first daemon: protobuf, config file --------------------------------
async function protobufDaemon() {
  console.log("== agentd serve exporting OTLP/HTTP protobuf (otlp: in the config file)");
  const receiver = await new Receiver().listen();
  const d = await startDaemon("pb", {
    config: `otlp:\n  endpoint: ${receiver.url}\n  batch_linger_ms: 50\n  initial_backoff_ms: 100\n` +
            `  max_backoff_ms: 400\n  max_attempts: 3\n  timeout_ms: 2000\n`,
  });
  try {
    let h = (await api(d.sock, "GET", "/v1/health")).body;
    check(h.telemetry?.otlp?.endpoint === receiver.url && h.telemetry.otlp.encoding === "protobuf",
          "/v1/health names the endpoint and the encoding", JSON.stringify(h.telemetry));
    const task = await api(d.sock, "POST", "/v1/tasks", { tools: ["cat", "curl-proxy"], label: "otlp export" });
    if (!check(task.status === 201, "a task with cat and curl-proxy", task.raw)) return;
    const id = task.body.id;
    const exec = (body, headers) => api(d.sock, "POST", `/v1/tasks/${id}/exec`, body, headers);

    // malformed trace contexts: refused, naming the field, nothing run
    let r = await exec({ tool: "cat", argv: ["cat", "/etc/hostname"] }, { traceparent: "00-abc-01" });
    check(r.status === 400 && r.body?.error?.message.startsWith("traceparent (header): "),
          "a malformed traceparent header is refused with 400 naming it", r.raw);
    r = await exec({ tool: "cat", argv: ["cat", "/etc/hostname"],
                     traceparent: "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01" });
    check(r.status === 400 && r.body?.error?.message === "traceparent: trace id: 32 lowercase hex digits expected",
          "an uppercase trace id in the body is refused with 400 naming the field", r.raw);

    // a Landlock denial (File System Activity), the traceparent as a header
    const tp1 = traceparent();
    r = await exec({ tool: "cat", argv: ["cat", "/etc/passwd"] }, { traceparent: tp1.text });
    if (!check(r.status === 200, "cat /etc/passwd runs (traceparent header)", r.raw)) return;
    check(r.body.traceparent === tp1.text, "the exec reply names the run's traceparent");
    let got = await checkRun(d, receiver, r.body, tp1, "cat /etc/passwd");
    const fileDeny = got.filter((g) => g.attributes["bulwark.kind"] === "decision" &&
                                       g.attributes["bulwark.decision"] === "deny" &&
                                       g.attributes["bulwark.object"] === "/etc/passwd");
    if (check(fileDeny.length >= 1, "the Landlock denial of /etc/passwd was exported",
              got.map((g) => g.body).join("\n"))) {
      const f = fileDeny[0];
      check(f.attributes["ocsf.class_uid"] === 1001n && f.attributes["ocsf.category_uid"] === 1n &&
            f.attributes["ocsf.activity_id"] === 14n && f.attributes["ocsf.type_uid"] === 100114n,
            "it is OCSF File System Activity: Open (1001, 100114)");
      check(f.attributes["ocsf.disposition_id"] === 2n && f.attributes["ocsf.action_id"] === 2n &&
            f.attributes["ocsf.status_id"] === 2n && f.attributes["ocsf.file.path"] === "/etc/passwd",
            "denied, blocked, failed, on file /etc/passwd");
      check(f.attributes["bulwark.layer"] === "landlock" && f.eventName === "bulwark.decision" &&
            f.severityNumber === 13 && f.attributes["bulwark.tool"] === "cat" &&
            f.attributes["bulwark.task_id"] === BigInt(id) && typeof f.attributes["bulwark.policy_version"] === "bigint",
            "layer landlock, severity WARN, the task, tool and policy version");
    }

    // a refused connect (Network Activity), the traceparent in the body
    const tp2 = traceparent();
    r = await exec({ tool: "curl-proxy", argv: ["curl", "-sS", "-m", "3", "--noproxy", "*", "http://127.0.0.2:3128/"],
                     traceparent: tp2.text });
    if (!check(r.status === 200, "curl to 127.0.0.2:3128 runs (traceparent in the body)", r.raw)) return;
    got = await checkRun(d, receiver, r.body, tp2, "curl 127.0.0.2:3128");
    const netDeny = got.filter((g) => g.attributes["bulwark.op"] === "connect" && g.attributes["bulwark.decision"] === "deny" &&
                                      g.attributes["bulwark.object"] === "tcp 127.0.0.2:3128");
    if (check(netDeny.length >= 1, "the refused connect was exported", got.map((g) => g.body).join("\n"))) {
      const n = netDeny[0];
      check(n.attributes["ocsf.class_uid"] === 4001n && n.attributes["ocsf.category_uid"] === 4n &&
            n.attributes["ocsf.activity_id"] === 1n && n.attributes["ocsf.type_uid"] === 400101n,
            "it is OCSF Network Activity: Open (4001, 400101)");
      check(n.attributes["ocsf.dst_endpoint.ip"] === "127.0.0.2" && n.attributes["ocsf.dst_endpoint.port"] === 3128n &&
            n.attributes["ocsf.connection_info.protocol_name"] === "tcp" && n.attributes["ocsf.status_code"] === "EPERM",
            "to 127.0.0.2:3128 over tcp, EPERM", show(n));
      check(n.attributes["bulwark.layer"] === "sock_addr", "decided by the sock_addr layer", show(n));
    }
    const unix = got.filter((g) => g.attributes["bulwark.layer"] === "sock_unix");
    if (unix.length)  // the resolver's connect to nscd, refused: a unix address in OCSF's terms
      check(unix.every((u) => u.attributes["ocsf.class_uid"] === 4001n && u.attributes["ocsf.dst_endpoint.name"]),
            `the unix connects (${unix.map((u) => u.attributes["bulwark.object"]).join(", ")}) are Network Activity too`);
    const procs = got.filter((g) => g.attributes["bulwark.kind"] === "decision" && g.attributes["ocsf.class_uid"] === 1007n);
    console.log(`       (${procs.length} process decisions of curl's run, e.g. ${procs[0]?.body ?? "none: monitor not loaded"})`);

    await everyStoreRecordOnce(d, receiver, "protobuf");
    resourceOk(receiver);
    check(receiver.invalid.length === 0, "every request decoded with the official types", receiver.invalid.join("\n"));

    // 503 twice, then 200
    console.log("== the receiver answers 503 twice, then 200");
    const before = receiver.requests.length;
    receiver.script = [503, 503];
    const tp3 = traceparent();
    r = await exec({ tool: "cat", argv: ["cat", "/etc/passwd"] }, { traceparent: tp3.text });
    check(r.status === 200, "cat runs while the receiver is busy", r.raw);
    await checkRun(d, receiver, r.body, tp3, "after two 503s");
    const seen = receiver.requests.slice(before).map((q) => q.status);
    check(seen[0] === 503 && seen[1] === 503 && seen[2] === 200, "the batch was sent again after each 503", seen.join(","));
    let mt = (await api(d.sock, "GET", "/metrics")).raw;
    check(metric(mt, "bulwark_otlp_retries_total") >= 2, "/metrics counts the retries",
          `retries ${metric(mt, "bulwark_otlp_retries_total")}`);
    h = (await api(d.sock, "GET", "/v1/health")).body.telemetry.otlp;
    check(h.retries >= 2 && h.state === "ok" && Object.values(h.dropped).every((v) => v === 0),
          "/v1/health: retries counted, state ok, nothing dropped", JSON.stringify(h));
    await everyStoreRecordOnce(d, receiver, "after the retries");

    // a dead receiver
    console.log("== the receiver is gone");
    await receiver.kill();
    const exported = h.records_exported;
    const tp4 = traceparent();
    const t0 = Date.now();
    r = await exec({ tool: "cat", argv: ["cat", "/etc/passwd"] }, { traceparent: tp4.text });
    const took = Date.now() - t0;
    check(r.status === 200 && r.body.decisions.some((x) => x.decision === "deny"),
          `the run goes on without the receiver (${took} ms), its denial in the reply`, r.raw.slice(0, 300));
    const stored = await storeRecords(d.sock, `&run=${r.body.run_id}`);
    check(stored.some((x) => x.kind === "run_exit"), "the store committed the run's records");
    const dropped = await until("the records not exported are counted as dropped in /metrics", async () => {
      const t = (await api(d.sock, "GET", "/metrics")).raw;
      const n = metric(t, 'bulwark_otlp_records_dropped_total{reason="export_failed"}');
      return n >= stored.length ? n : false;
    });
    check(dropped >= stored.length, `/metrics: bulwark_otlp_records_dropped_total{reason="export_failed"} ${dropped}`);
    const health = (await api(d.sock, "GET", "/v1/health")).body;
    const o = health.telemetry.otlp;
    check(health.status === "ok" && health.accepting_runs === true && health.audit.state === "ok",
          "/v1/health: the daemon and its store are ok", JSON.stringify(health.audit));
    check(o.state === "failing" && o.dropped.export_failed >= stored.length && o.last_error.includes("connect") &&
          o.records_exported === exported, "/v1/health telemetry: failing, the drops and the last error",
          JSON.stringify(o));
    mt = (await api(d.sock, "GET", "/metrics")).raw;
    check(metric(mt, "bulwark_audit_records_dropped_total") === 0 && metric(mt, "bulwark_audit_gap_records_total") === 0,
          "the store dropped nothing");
  } finally {
    const code = await stopDaemon(d);
    check(code === 0, `agentd stopped cleanly with the receiver gone (exit ${code})`);
  }
}

// ---- second daemon: JSON, command line; MCP's _meta.traceparent ---------
async function jsonDaemon() {
  console.log("== agentd serve exporting OTLP/HTTP JSON (--otlp-endpoint, --otlp-encoding)");
  const receiver = await new Receiver().listen();
  const d = await startDaemon("json", { args: ["--otlp-endpoint", receiver.url, "--otlp-encoding", "json"] });
  try {
    const task = await api(d.sock, "POST", "/v1/tasks", { tools: ["cat"], label: "otlp json" });
    if (!check(task.status === 201, "a task with cat", task.raw)) return;
    const tp = traceparent();
    const r = await api(d.sock, "POST", `/v1/tasks/${task.body.id}/exec`,
                        { tool: "cat", argv: ["cat", "/etc/passwd"], traceparent: tp.text });
    if (!check(r.status === 200, "cat /etc/passwd runs", r.raw)) return;
    const got = await checkRun(d, receiver, r.body, tp, "json: cat /etc/passwd");
    check(got.some((g) => g.attributes["ocsf.class_uid"] === 1001n && g.attributes["bulwark.decision"] === "deny"),
          "json: the Landlock denial is File System Activity");
    check(receiver.requests.every((q) => q.encoding === "json"), "every request was OTLP JSON");

    // MCP: tools/call with _meta.traceparent
    const tpm = traceparent();
    const child = spawn(AGENTD, ["mcp", "--socket", d.sock, "--tools", "cat", "--label", "otlp mcp"],
                        { stdio: ["pipe", "pipe", "inherit"] });
    const lines = readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]();
    const ask = async (msg) => {
      child.stdin.write(JSON.stringify(msg) + "\n");
      const n = await Promise.race([lines.next(), sleep(30000).then(() => ({ timeout: true }))]);
      if (n.timeout || n.done) throw new Error("agentd mcp did not answer");
      return JSON.parse(n.value);
    };
    await ask({ jsonrpc: "2.0", id: 1, method: "initialize",
                params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "otlp", version: "0" } } });
    child.stdin.write(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) + "\n");
    const bad = await ask({ jsonrpc: "2.0", id: 2, method: "tools/call",
                            params: { name: "cat", arguments: { args: ["/etc/hostname"] }, _meta: { traceparent: "nope" } } });
    check(bad.error?.code === -32602 && bad.error.message.startsWith("_meta.traceparent: "),
          "MCP: a malformed _meta.traceparent is refused naming it", JSON.stringify(bad));
    const call = await ask({ jsonrpc: "2.0", id: 3, method: "tools/call",
                             params: { name: "cat", arguments: { args: ["/etc/passwd"] },
                                       _meta: { traceparent: tpm.text, progressToken: "p1" } } });
    check(call.result !== undefined, "MCP: tools/call with _meta.traceparent ran cat", JSON.stringify(call).slice(0, 300));
    const runId = call.result?.structuredContent?.run_id;
    if (check(runId !== undefined, "MCP: the result names the run")) {
      await checkRun(d, receiver, { run_id: runId }, tpm, "MCP tools/call");
    }
    child.stdin.end();
    await Promise.race([once(child, "exit"), sleep(10000)]);
    if (child.exitCode === null) child.kill("SIGKILL");

    await everyStoreRecordOnce(d, receiver, "json");
    resourceOk(receiver);
    check(receiver.invalid.length === 0, "every JSON request decoded with the official types", receiver.invalid.join("\n"));
  } finally {
    const code = await stopDaemon(d);
    check(code === 0, `agentd stopped cleanly (exit ${code})`);
    // the records of the stop itself were exported before the daemon exited
    const stops = receiver.records.filter((r) => r.attributes["bulwark.host.event"] === "daemon_stop");
    check(stops.length === 1, "the daemon_stop record was exported before agentd exited");
    await receiver.kill();
  }
}

try {
  await protobufDaemon();
  await jsonDaemon();
} catch (e) {
  check(false, "the tier ran to its end", e.stack);
}
console.log(`\n${passed} passed, ${failures.length} failed`);
for (const f of failures) console.log(`failed: ${f}`);
process.exit(failures.length ? 1 : 0);
