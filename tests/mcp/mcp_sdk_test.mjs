// `agentd mcp` driven by the official MCP TypeScript SDK (@modelcontextprotocol/sdk)
// as the client, against a real `agentd serve` with its own state directory and
// socket: list the tools (schemas compile and validate), call an allowed tool
// with a working file, call one whose operation is denied and read the
// explanation, and check the session's task and its audit records in the daemon.
// The raw JSON-RPC error handling is checked on a second session with bytes
// this test writes itself.
//
// Environment: AGENTD (the agentd binary), RULES_DIR (the shipped rules).
// Exit 0: pass, 1: fail, 77: a requirement is missing (printed).
import { spawn } from "node:child_process";
import { once } from "node:events";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";
import assert from "node:assert/strict";

import Ajv from "ajv";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import crypto from "node:crypto";
import { LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js";

const AGENTD = process.env.AGENTD;
const RULES_DIR = process.env.RULES_DIR;
if (process.getuid() !== 0) {
  console.log("mcp_sdk: privileged tier: needs root (agentd runs real sandboxes)");
  process.exit(77);
}
if (!AGENTD || !RULES_DIR) {
  console.error("mcp_sdk: set AGENTD and RULES_DIR");
  process.exit(1);
}

let checks = 0;
function check(cond, what) {
  assert.ok(cond, what);
  ++checks;
}
function equal(actual, expected, what) {
  assert.deepEqual(actual, expected, what);
  ++checks;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function api(sock, method, target, body) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request(
      {
        socketPath: sock,
        method,
        path: target,
        headers: data ? { "content-type": "application/json", "content-length": Buffer.byteLength(data) } : {},
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

// A real daemon with its own state directory, work root and socket.
async function startDaemon(rulesDir = RULES_DIR) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mcp-sdk-"));
  fs.chmodSync(dir, 0o711); // the sandbox uid must reach the task work directories
  const sock = path.join(dir, "agentd.sock");
  const log = fs.openSync(path.join(dir, "agentd.log"), "w");
  const child = spawn(
    AGENTD,
    ["serve", "--state-dir", path.join(dir, "state"), "--socket", sock, "--work-root", path.join(dir, "work"),
     "--rules", rulesDir],
    { stdio: ["ignore", log, log] },
  );
  for (let i = 0; i < 200; ++i) {
    await sleep(50);
    if (child.exitCode !== null) break;
    try {
      const r = await api(sock, "GET", "/v1/health");
      if (r.status === 200) return { dir, sock, child };
    } catch {}
  }
  throw new Error("agentd serve did not come up:\n" + fs.readFileSync(path.join(dir, "agentd.log"), "utf8"));
}

async function stopDaemon(d) {
  if (d.child.exitCode === null) {
    d.child.kill("SIGTERM");
    await Promise.race([once(d.child, "exit"), sleep(15000)]);
    if (d.child.exitCode === null) d.child.kill("SIGKILL");
  }
  fs.rmSync(d.dir, { recursive: true, force: true });
}

async function waitClosed(sock, task) {
  for (let i = 0; i < 100; ++i) {
    const t = await api(sock, "GET", `/v1/tasks/${task}`);
    if (t.body && t.body.state === "closed") return t.body;
    await sleep(50);
  }
  return (await api(sock, "GET", `/v1/tasks/${task}`)).body;
}

// JSON-RPC by hand: one line out, the next line back.
async function rawProtocol(d) {
  const child = spawn(AGENTD, ["mcp", "--socket", d.sock, "--tools", "cat"], { stdio: ["pipe", "pipe", "inherit"] });
  const lines = readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async () => {
    const r = await Promise.race([lines.next(), sleep(20000).then(() => ({ timeout: true }))]);
    assert.ok(!r.timeout && !r.done, "agentd mcp answered");
    return JSON.parse(r.value);
  };
  const ask = async (line) => {
    child.stdin.write(line + "\n");
    return next();
  };

  let r = await ask("this is not json");
  equal([r.id, r.error?.code], [null, -32700], "parse error");
  r = await ask("x".repeat(17 << 20));
  equal([r.id, r.error?.code], [null, -32600], "a line over 16 MiB is refused, not buffered");
  r = await ask(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }));
  equal([r.id, r.error?.code], [1, -32600], "tools/list before initialize");
  r = await ask(JSON.stringify({ jsonrpc: "2.0", id: { a: 1 }, method: "ping" }));
  equal([r.id, r.error?.code], [null, -32600], "an object as id");
  r = await ask(JSON.stringify({ jsonrpc: "1.0", id: 2, method: "ping" }));
  equal([r.id, r.error?.code], [2, -32600], "jsonrpc 1.0");
  r = await ask(JSON.stringify({ jsonrpc: "2.0", id: 3, method: "initialize", params: { capabilities: {} } }));
  equal([r.id, r.error?.code], [3, -32602], "initialize without protocolVersion");

  // Version negotiation: an unknown version gets the newest the server speaks;
  // a known older one is echoed.
  r = await ask(JSON.stringify({
    jsonrpc: "2.0", id: 4, method: "initialize",
    params: { protocolVersion: "1999-01-01", capabilities: {}, clientInfo: { name: "raw", version: "0" } },
  }));
  equal(r.result?.protocolVersion, "2025-11-25", "unknown version answered with the newest");
  check(r.result?.capabilities?.tools, "tools capability");
  r = await ask(JSON.stringify({
    jsonrpc: "2.0", id: 5, method: "initialize",
    params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "0" } },
  }));
  equal(r.error?.code, -32600, "a second initialize");

  // A notification gets no answer: the next line is the ping's.
  child.stdin.write(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) + "\n");
  r = await ask(JSON.stringify({ jsonrpc: "2.0", id: "p", method: "ping" }));
  equal([r.id, r.result], ["p", {}], "ping after a notification");
  r = await ask(JSON.stringify({ jsonrpc: "2.0", id: 6, method: "resources/list" }));
  equal(r.error?.code, -32601, "unknown method");
  r = await ask(JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/call", params: "cat" }));
  equal(r.error?.code, -32602, "params not an object");
  r = await ask(JSON.stringify({ jsonrpc: "2.0", id: 8, method: "tools/call", params: { name: "curl" } }));
  equal(r.error?.code, -32602, "a tool outside the session's task");
  r = await ask(JSON.stringify({ jsonrpc: "2.0", id: 9, method: "tools/list", params: { cursor: "x" } }));
  equal(r.error?.code, -32602, "a cursor never issued");
  r = await ask(JSON.stringify([{ jsonrpc: "2.0", id: 10, method: "ping" }]));
  equal([r.id, r.error?.code], [null, -32600], "batches are gone since 2025-06-18");
  r = await ask(JSON.stringify({
    jsonrpc: "2.0", id: 11, method: "tools/call", params: { name: "cat", arguments: { args: "notes.txt" } },
  }));
  equal(r.result?.isError, true, "bad arguments are a tool error the model can correct");
  check(r.result?.content?.[0]?.text.includes("arguments.args: must be an array"), "the bad argument is named");

  // The task of this session is open in the daemon, and closed at EOF.
  const tasks = (await api(d.sock, "GET", "/v1/tasks")).body.tasks;
  const mine = tasks.filter((t) => t.state === "open" && t.tools.length === 1 && t.tools[0] === "cat");
  equal(mine.length, 1, "one open task for the raw session");
  child.stdin.end();
  const [code] = await Promise.race([once(child, "exit"), sleep(15000).then(() => [null])]);
  equal(code, 0, "agentd mcp exits 0 at the end of stdin");
  equal((await waitClosed(d.sock, mine[0].id)).state, "closed", "the raw session's task is closed");
}

// Without a daemon the session cannot start, and says why.
async function noDaemon(d) {
  const child = spawn(AGENTD, ["mcp", "--socket", path.join(d.dir, "no-such.sock")], { stdio: ["pipe", "pipe", "inherit"] });
  const lines = readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  child.stdin.write(JSON.stringify({
    jsonrpc: "2.0", id: 1, method: "initialize",
    params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: "raw", version: "0" } },
  }) + "\n");
  const r = JSON.parse((await lines.next()).value);
  equal(r.error?.code, -32603, "initialize without a daemon is an internal error");
  check(r.error.message.includes("no-such.sock"), "the error names the socket: " + r.error.message);
  child.stdin.end();
  await once(child, "exit");
}

async function sdkSession(d) {
  const transport = new StdioClientTransport({
    command: AGENTD,
    args: ["mcp", "--socket", d.sock, "--tools", "cat,sh", "--label", "sdk session"],
    stderr: "inherit",
  });
  const client = new Client({ name: "bulwark-mcp-sdk-test", version: "1.0.0" });
  await client.connect(transport);
  equal(client.getServerVersion()?.name, "bulwark-agentd", "server info");
  check(client.getServerCapabilities()?.tools, "tools capability");
  check((client.getInstructions() ?? "").includes("work directory"), "instructions name the work directory");

  // tools/list: one MCP tool per rule-file tool of the task, valid schemas.
  const { tools } = await client.listTools();
  equal(tools.map((t) => t.name).sort(), ["cat", "sh"], "the task's tools");
  const ajv = new Ajv({ strict: false });
  const cat = tools.find((t) => t.name === "cat");
  const validateIn = ajv.compile(cat.inputSchema);
  check(validateIn({ args: ["a.txt"], stdin: "x", files: { "a.txt": "x" }, timeout_ms: 1000 }), "a full input validates");
  check(!validateIn({ args: [1] }), "a number in args is rejected by the schema");
  check(!validateIn({ argv: ["x"] }), "an unknown key is rejected by the schema");
  check(!validateIn({ files: { "a.txt": 3 } }), "file content must be a string");
  ajv.compile(cat.outputSchema);
  ++checks;
  check(cat.description.includes("concatenate files"), "the description comes from the rule file");
  check(cat.description.includes("policy cat"), "the description carries the explanation of the rules");

  // An allowed call: cat of a file passed as a working file.
  const ok = await client.callTool({
    name: "cat",
    arguments: { args: ["notes/in.txt"], files: { "notes/in.txt": "carried by MCP\n" } },
  });
  equal(ok.isError, false, "the allowed call is no error: " + JSON.stringify(ok));
  equal(ok.structuredContent.exit_status, 0, "exit status");
  equal(ok.structuredContent.stdout, "carried by MCP\n", "stdout");
  equal(ok.structuredContent.files, [{ path: "notes/in.txt", bytes: 15 }], "the file written");
  check(ok.content[0].text.includes("cat: exit status 0"), "text: exit status");
  check(ok.content[0].text.includes("carried by MCP"), "text: stdout");
  const task = ok.structuredContent.task_id;
  const t = (await api(d.sock, "GET", `/v1/tasks/${task}`)).body;
  equal([t.state, t.label, t.tools], ["open", "sdk session", ["cat", "sh"]], "the session's task");

  // Control for the denial below: the file is readable unconfined.
  fs.accessSync("/etc/passwd", fs.constants.R_OK);
  const denied = await client.callTool({ name: "cat", arguments: { args: ["/etc/passwd"] } });
  const sc = denied.structuredContent;
  equal(denied.isError, true, "the denied call is an error");
  equal(sc.exit_status, 1, "cat fails");
  equal(sc.stdout, "", "nothing of /etc/passwd is shown");
  check(sc.stderr.includes("Permission denied"), "stderr: " + sc.stderr);
  check(denied.content[0].text.includes("Permission denied"), "text: the error");
  // The denials reported are the run's deny records in the daemon's store.
  const rows = (await api(d.sock, "GET", `/v1/audit?run=${sc.run_id}&kind=decision`)).body.rows;
  const denyRows = rows.filter((r) => r.decision === "deny" || r.decision === "audit");
  equal(sc.denials.filter((x) => x.seq !== undefined).length, denyRows.length, "one denial per deny record");
  for (const x of sc.denials) {
    check(typeof x.explanation === "string" && x.explanation.length > 0, "each denial is explained");
    if (x.rule) check(denied.content[0].text.includes("rule: " + x.rule), "the text names the rule " + x.rule);
  }
  // The kernel's denial of the read, explained: Landlock refused the open, the
  // rule that decided is the default deny (no rule of cat covers /etc/passwd),
  // and no grant can allow it since the tool's own rules do not.
  const open = sc.denials.find((x) => x.layer === "landlock" && x.op === "file_open" && x.object === "/etc/passwd");
  check(open, "Landlock's denial of the open of /etc/passwd is reported: " + JSON.stringify(sc.denials));
  equal([open.decision, open.rule, open.grant_would_allow], ["deny", "the default", null], "the denial's rule");
  check(open.explanation.includes("no rule allows read on /etc/passwd"), "explanation: " + open.explanation);
  const text = denied.content[0].text;
  check(text.includes("landlock layer: file_open /etc/passwd (deny)"), "text: the denial: " + text);
  check(text.includes("why: " + open.explanation), "text: the explanation");
  check(text.includes("no grant of this task would allow it"), "text: no grant can allow it");

  // A working file that may not be written: refused, named, no run.
  const refused = await client.callTool({ name: "cat", arguments: { args: ["x"], files: { "/etc/x": "x" } } });
  equal(refused.isError, true, "a refused file is an error");
  check(refused.content[0].text.includes("files./etc/x:"), "the file is named: " + refused.content[0].text);

  // A tool outside the task is a protocol error.
  await assert.rejects(client.callTool({ name: "curl", arguments: {} }), (e) => e.code === -32602);
  ++checks;

  // Every call is audited in the daemon's store: the two runs, nothing for the refusal.
  const starts = (await api(d.sock, "GET", `/v1/audit?task=${task}&kind=run_start`)).body.rows;
  equal(starts.length, 2, "two runs recorded");
  await client.close();
  equal((await waitClosed(d.sock, task)).state, "closed", "the session's task is closed with the session");
}

// A session under a grant narrower than the tool's rules: sh may create only
// in out/. A write elsewhere is denied by the grant, not by the rules.
async function grantSession(d) {
  const grant = { files: [{ path: "${workdir}/out", rights: ["create", "write"] }] };
  const transport = new StdioClientTransport({
    command: AGENTD,
    args: ["mcp", "--socket", d.sock, "--tools", "sh", "--grant", JSON.stringify(grant)],
    stderr: "inherit",
  });
  const client = new Client({ name: "bulwark-mcp-grant-test", version: "1.0.0" });
  await client.connect(transport);
  // Control: inside out/ the write lands.
  const inside = await client.callTool({
    name: "sh", arguments: { args: ["-c", "echo in > out/a.txt && cat out/a.txt"], files: { "out/.keep": "" } },
  });
  equal([inside.isError, inside.structuredContent.stdout], [false, "in\n"], "a write the grant allows");
  const task = inside.structuredContent.task_id;
  equal((await api(d.sock, "GET", `/v1/tasks/${task}`)).body.grant, grant, "the session's task has the grant");
  const outside = await client.callTool({ name: "sh", arguments: { args: ["-c", "echo out > top.txt"] } });
  const sc = outside.structuredContent;
  equal(outside.isError, true, "a write outside the grant is an error");
  check(sc.exit_status !== 0, "sh fails");
  check(sc.stderr.includes("Permission denied"), "stderr: " + sc.stderr);
  const workdir = (await api(d.sock, "GET", `/v1/tasks/${task}`)).body.workdir;
  check(!fs.existsSync(path.join(workdir, "top.txt")), "top.txt was not created");
  const rows = (await api(d.sock, "GET", `/v1/audit?run=${sc.run_id}&kind=decision`)).body.rows;
  equal(sc.denials.filter((x) => x.seq !== undefined).length,
        rows.filter((r) => r.decision === "deny" || r.decision === "audit").length, "one denial per deny record");
  // The kernel's denial names the tool's rule that would allow the create and
  // the grant that would: the tool's rules allow it, the task's grant does not.
  const create = sc.denials.find((x) => x.layer === "landlock" && x.op === "file_create");
  check(create, "Landlock's denial of the create is reported: " + JSON.stringify(sc.denials));
  equal(create.object, workdir, "the create was denied in the work directory");
  check(/rules\/sh\.yaml:\d+:\d+/.test(create.explanation), "the explanation names sh.yaml:line: " + create.explanation);
  check(create.grant_would_allow, "a grant would allow it");
  check(/the tool's rules allow this \(.*rules\/sh\.yaml:\d+:\d+/.test(create.grant_would_allow.message),
        "the grant suggestion names the rule: " + create.grant_would_allow.message);
  const suggested = create.grant_would_allow.grant;
  equal(suggested.files?.[0]?.path, workdir, "the suggested grant names the work directory");
  check(suggested.files[0].rights.includes("create"), "the suggested grant names create");
  check(outside.content[0].text.includes("grant: " + JSON.stringify(suggested)), "text: the grant that would allow it");

  // Acting on it: the task takes the suggested grant, and the same call succeeds.
  const put = await api(d.sock, "PUT", `/v1/tasks/${task}/grant`, { grant: suggested });
  equal(put.status, 200, "the suggested grant is accepted: " + put.raw);
  const again = await client.callTool({ name: "sh", arguments: { args: ["-c", "echo out > top.txt"] } });
  equal([again.isError, again.structuredContent.denials], [false, []], "under the suggested grant the write is allowed");
  check(fs.existsSync(path.join(workdir, "top.txt")), "top.txt was created");

  // A long call does not hold up the session: a ping is answered while it
  // runs; the call ends at its time limit and says so.
  let spinDone = 0;
  const spin = client.callTool({ name: "sh", arguments: { args: ["-c", "while :; do :; done"], timeout_ms: 2500 } })
    .then((r) => { spinDone = Date.now(); return r; });
  await sleep(300);
  await client.ping();
  const pinged = Date.now();
  const spun = await spin;
  check(pinged < spinDone, `the ping (${pinged}) was answered before the call ended (${spinDone})`);
  equal([spun.isError, spun.structuredContent.exit_status], [true, 124], "the call ends at its time limit");
  check(spun.content[0].text.includes("timed out"), "text: timed out: " + spun.content[0].text);

  // Cancelling a call (the SDK sends notifications/cancelled on abort) ends
  // its run in the daemon: the tool dies at once, not at its 60 s limit (the
  // uncancelled spin above is the control: it ran to its limit).
  const ac = new AbortController();
  const started = Date.now();
  const long = client.callTool({ name: "sh", arguments: { args: ["-c", "while :; do :; done"], timeout_ms: 60000 } },
                               undefined, { signal: ac.signal, timeout: 120000 });
  await sleep(800);
  ac.abort("the agent changed its mind");
  await assert.rejects(long);
  let exit;
  for (let i = 0; i < 200 && !exit; ++i) {
    const rows = (await api(d.sock, "GET", `/v1/audit?task=${task}&kind=run_exit`)).body.rows;
    exit = rows.find((r) => r.run_id > spun.structuredContent.run_id);
    if (!exit) await sleep(50);
  }
  check(exit, "the cancelled call's run has its exit record");
  const detail = typeof exit.detail === "string" ? JSON.parse(exit.detail) : exit.detail;
  check(detail.wall_us < 20000000, "the run ended at the cancel, long before its limit: wall_us " + detail.wall_us);
  check(JSON.stringify(detail.denials).includes("cancelled"), "its report says it was cancelled: " + JSON.stringify(detail.denials));
  check(Date.now() - started < 30000, "the whole cancel took " + (Date.now() - started) + " ms");
  // The session goes on: the next call is answered.
  const after = await client.callTool({ name: "sh", arguments: { args: ["-c", "echo still here"] } });
  equal(after.structuredContent.stdout, "still here\n", "a call after the cancel");
  await client.close();
}

// Streamable HTTP: `agentd mcp --http` on a loopback port with a bearer token.
const HTTP_PORT = 18421;
async function httpSession(d) {
  const token = crypto.randomBytes(24).toString("hex");
  const hash = crypto.createHash("sha256").update(token).digest("hex");
  const server = spawn(AGENTD, ["mcp", "--socket", d.sock, "--tools", "cat", "--label", "http session",
                                "--http", `127.0.0.1:${HTTP_PORT}`, "--token-sha256", hash],
                       { stdio: ["ignore", "inherit", "pipe"] });
  let said = "";
  server.stderr.on("data", (c) => (said += c));
  for (let i = 0; i < 200 && !said.includes("streamable HTTP on"); ++i) await sleep(50);
  check(said.includes(`http://127.0.0.1:${HTTP_PORT}/mcp`), "agentd mcp --http is listening: " + said);
  const url = `http://127.0.0.1:${HTTP_PORT}/mcp`;
  const auth = { Authorization: `Bearer ${token}` };
  try {
    // Without the token, with a foreign Origin, without a session: refused.
    const post = (headers, body) => fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
      body: JSON.stringify(body),
    });
    const ping = { jsonrpc: "2.0", id: 1, method: "ping" };
    equal((await post({}, ping)).status, 401, "no bearer token");
    equal((await post({ Authorization: "Bearer " + "x".repeat(48) }, ping)).status, 401, "a wrong token");
    equal((await post({ ...auth, Origin: "http://evil.example" }, ping)).status, 403, "a foreign Origin");
    equal((await post(auth, ping)).status, 400, "no Mcp-Session-Id");
    equal((await post({ ...auth, "mcp-session-id": "0".repeat(32) }, ping)).status, 404, "an unknown session");
    equal((await fetch(url, { headers: auth })).status, 405, "GET: no server-sent stream");

    const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: auth } });
    const client = new Client({ name: "bulwark-mcp-http-test", version: "1.0.0" });
    await client.connect(transport);
    check(/^[0-9a-f]{32}$/.test(transport.sessionId ?? ""), "a session id: " + transport.sessionId);
    const { tools } = await client.listTools();
    equal(tools.map((t) => t.name), ["cat"], "the HTTP session's tools");
    const ok = await client.callTool({ name: "cat", arguments: { args: ["-"], stdin: "over HTTP\n" } });
    equal([ok.isError, ok.structuredContent.stdout], [false, "over HTTP\n"], "a call over HTTP");
    const task = ok.structuredContent.task_id;
    equal((await api(d.sock, "GET", `/v1/tasks/${task}`)).body.label, "http session", "the HTTP session's task");
    const sid = transport.sessionId;
    await transport.terminateSession();
    equal((await waitClosed(d.sock, task)).state, "closed", "DELETE ends the session and closes its task");
    equal((await post({ ...auth, "mcp-session-id": sid }, ping)).status, 404, "the ended session is gone");
    await client.close();
  } finally {
    server.kill("SIGTERM");
    const [code] = await Promise.race([once(server, "exit"), sleep(15000).then(() => [null])]);
    equal(code, 0, "agentd mcp --http stops on SIGTERM");
  }
}

// A session whose client vanished without DELETE ends after --session-idle-ms.
async function httpIdle(d) {
  const token = crypto.randomBytes(24).toString("hex");
  const hash = crypto.createHash("sha256").update(token).digest("hex");
  const port = HTTP_PORT + 1;
  const server = spawn(AGENTD, ["mcp", "--socket", d.sock, "--tools", "cat", "--label", "idle session",
                                "--http", `127.0.0.1:${port}`, "--token-sha256", hash, "--session-idle-ms", "1000"],
                       { stdio: ["ignore", "inherit", "pipe"] });
  let said = "";
  server.stderr.on("data", (c) => (said += c));
  for (let i = 0; i < 200 && !said.includes("streamable HTTP on"); ++i) await sleep(50);
  const url = `http://127.0.0.1:${port}/mcp`;
  const post = (headers, body) => fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream",
               Authorization: `Bearer ${token}`, ...headers },
    body: JSON.stringify(body),
  });
  try {
    const init = await post({}, { jsonrpc: "2.0", id: 1, method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "idle", version: "0" } } });
    equal(init.status, 200, "initialize over raw HTTP");
    const sid = init.headers.get("mcp-session-id");
    check(sid, "a session id header");
    equal((await post({ "mcp-session-id": sid, "mcp-protocol-version": "1999-01-01" },
                      { jsonrpc: "2.0", id: 2, method: "ping" })).status, 400, "an unsupported MCP-Protocol-Version");
    const note = await post({ "mcp-session-id": sid }, { jsonrpc: "2.0", method: "notifications/initialized" });
    equal(note.status, 202, "a notification is accepted without a body");
    const tasks = (await api(d.sock, "GET", "/v1/tasks")).body.tasks.filter((t) => t.label === "idle session");
    equal(tasks.map((t) => t.state), ["open"], "the idle session's task is open");
    await sleep(1500);
    // The next request (any session) ends the idle one.
    await post({ "mcp-session-id": "0".repeat(32) }, { jsonrpc: "2.0", id: 3, method: "ping" });
    equal((await waitClosed(d.sock, tasks[0].id)).state, "closed", "the idle session's task is closed");
    equal((await post({ "mcp-session-id": sid }, { jsonrpc: "2.0", id: 4, method: "ping" })).status, 404,
          "the idle session is gone");
  } finally {
    server.kill("SIGTERM");
    await Promise.race([once(server, "exit"), sleep(15000)]);
  }
}

// The default tool set when one tool cannot be set up for a task (its rule
// names a host that does not resolve, as the shipped curl rule does on an
// offline machine): the others are served and callable, the missing one is
// listed as unavailable with the reason, and the log says so.
async function unavailableTool() {
  const rules = fs.mkdtempSync(path.join(os.tmpdir(), "mcp-rules-"));
  fs.cpSync(path.join(RULES_DIR, "base"), path.join(rules, "base"), { recursive: true });
  fs.copyFileSync(path.join(RULES_DIR, "cat.yaml"), path.join(rules, "cat.yaml"));
  const host = "api.bulwark-test.invalid";
  const curl = fs.readFileSync(path.join(RULES_DIR, "curl.yaml"), "utf8").replace("host: api.github.com", `host: ${host}`);
  check(curl.includes(host), "the curl rule names a host that does not resolve");
  fs.writeFileSync(path.join(rules, "curl.yaml"), curl);
  const d = await startDaemon(rules);
  try {
    // Control: a task that needs curl cannot be made (the cause is real).
    const refused = await api(d.sock, "POST", "/v1/tasks", { tools: ["cat", "curl"] });
    equal(refused.status, 422, "a task with curl is refused: " + refused.raw);
    check(refused.raw.includes(host), "the refusal names the host: " + refused.raw);

    let log = "";
    const transport = new StdioClientTransport({ command: AGENTD, args: ["mcp", "--socket", d.sock], stderr: "pipe" });
    transport.stderr.on("data", (c) => (log += c));
    const client = new Client({ name: "bulwark-mcp-sdk-test", version: "1.0.0" });
    await client.connect(transport);
    const { tools } = await client.listTools();
    equal(tools.map((t) => t.name).sort(), ["cat", "curl"], "both tools are listed");
    const missing = tools.find((t) => t.name === "curl");
    check(missing.description.startsWith("UNAVAILABLE in this session: "), "the description says so: " + missing.description);
    check(missing.description.includes(host), "the description gives the reason: " + missing.description);
    equal(missing.title, "curl (unavailable)", "the title says so");
    check((missing._meta?.["bulwark/unavailable"] ?? "").includes(host), "_meta carries the reason");
    check((client.getInstructions() ?? "").includes("curl is unavailable in this session"), "the instructions say so");

    // The tool that can be set up is served and callable.
    const ok = await client.callTool({ name: "cat", arguments: { args: ["-"], stdin: "served\n" } });
    equal([ok.isError, ok.structuredContent?.stdout], [false, "served\n"], "cat runs: " + JSON.stringify(ok));
    const task = (await api(d.sock, "GET", `/v1/tasks/${ok.structuredContent.task_id}`)).body;
    equal(task.tools, ["cat"], "the session's task holds the tool that can run");
    equal(task.unavailable.map((u) => u.tool), ["curl"], "and names the one left out");
    // The missing one answers with why, as a tool error the agent reads; no run.
    const no = await client.callTool({ name: "curl", arguments: { args: ["https://example.invalid/"] } });
    equal(no.isError, true, "calling the unavailable tool is an error");
    check(no.content[0].text.startsWith("curl is unavailable in this session: "), "text: " + no.content[0].text);
    check(no.content[0].text.includes(host), "the reason: " + no.content[0].text);
    const starts = (await api(d.sock, "GET", `/v1/audit?task=${task.id}&kind=run_start`)).body.rows;
    equal(starts.length, 1, "only cat ran");
    await client.close();
    check(/tool curl is unavailable in this session: .*api\.bulwark-test\.invalid/.test(log), "the log says so: " + log);

    // Tools asked for by name are all required: the session fails, with why.
    const strict = new Client({ name: "bulwark-mcp-sdk-test", version: "1.0.0" });
    const strictTransport = new StdioClientTransport({
      command: AGENTD, args: ["mcp", "--socket", d.sock, "--tools", "cat,curl"], stderr: "ignore",
    });
    await assert.rejects(strict.connect(strictTransport), (e) => String(e.message).includes(host));
    ++checks;
    await strictTransport.close();
  } finally {
    await stopDaemon(d);
    fs.rmSync(rules, { recursive: true, force: true });
  }
}

const d = await startDaemon();
let failed = false;
try {
  equal(LATEST_PROTOCOL_VERSION <= "2025-11-25", true, "the SDK speaks a version the server knows");
  await rawProtocol(d);
  await noDaemon(d);
  await sdkSession(d);
  await grantSession(d);
  await httpSession(d);
  await httpIdle(d);
  await unavailableTool();
} catch (e) {
  failed = true;
  console.error("mcp_sdk: FAIL:", e?.stack ?? e);
  try {
    console.error(fs.readFileSync(path.join(d.dir, "agentd.log"), "utf8").slice(-4000));
  } catch {}
}
await stopDaemon(d);
if (failed) process.exit(1);
console.log(`mcp_sdk: ${checks} checks passed`);
process.exit(0);
