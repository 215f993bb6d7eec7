// Tier dashboard_browser: the page in a real browser (Debian's chromium,
// headless, driven by playwright-core) against a real `agentd serve`.
// A task runs a tool whose operation is denied; the denial's decision record
// must show in the live stream within one second of the decision, a filter
// must narrow the stream (on the page and on the server), the task view must
// show the deciding rule's file:line and the grant that would allow it, audit
// search must page, and a replay must show its differences. A tool with a
// behaviour profile (watched: sh's rules, profile learn: 3, in a copy of the
// shipped rules) learns three runs; a fourth that runs a binary they never
// ran must show in the Unusual view with its evidence, with the tool's
// profile, and its Accept must teach the profile that run (refused while the
// profile is pinned). Screenshots go to $DASHBOARD_ARTIFACTS (the build
// tree's Testing/artifacts/dashboard).
import { existsSync, mkdirSync, mkdtempSync, rmSync, chownSync, cpSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RULES, check, finish, skip, sleep, startAgentd } from "./lib.mjs";

const CHROMIUM = "/usr/bin/chromium";
const PORT = Number(process.env.DASHBOARD_BROWSER_PORT ?? 18320);
const ART = process.env.DASHBOARD_ARTIFACTS ?? join(process.cwd(), "artifacts");
const STREAM_BUDGET_MS = 1000;

if (process.getuid && process.getuid() !== 0) skip("agentd serve runs tools in sandboxes: needs root");
if (!existsSync(CHROMIUM)) skip(`no ${CHROMIUM} (Debian's chromium package)`);
let chromium;
try {
  ({ chromium } = await import("playwright-core"));
} catch (e) {
  skip(`playwright-core not installed next to the test (npm ci in tests/dashboard): ${e.message}`);
}

if (!RULES || !existsSync(RULES)) skip(`BULWARK_RULES_DIR not set or missing (the shipped rules): ${RULES}`);

mkdirSync(ART, { recursive: true });
const profile = mkdtempSync(join(tmpdir(), "dashboard-chromium-"));
// the shipped rules and one tool that keeps a behaviour profile
const rulesCopy = mkdtempSync(join(tmpdir(), "dashboard-rules-"));
cpSync(RULES, rulesCopy, { recursive: true });
writeFileSync(join(rulesCopy, "watched.yaml"), "tool: watched\nextends: sh\nprofile:\n  learn: 3\n  task_learn: 3\n  respond: record\n");
writeFileSync(join(rulesCopy, "narrowing.yaml"), "tool: narrowing\nextends: sh\nprofile:\n  learn: 3\n  respond: narrow\n");
const d = await startAgentd(PORT, "browser", { rules: rulesCopy });
const ctx = await chromium.launchPersistentContext(profile, {
  executablePath: CHROMIUM,
  headless: true,
  viewport: { width: 1400, height: 900 },
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync"],
});
const page = ctx.pages()[0] ?? (await ctx.newPage());
const cspViolations = [];
const pageErrors = [];
page.on("console", (m) => {
  if (/Content Security Policy|Refused to/.test(m.text())) cspViolations.push(m.text());
});
page.on("pageerror", (e) => pageErrors.push(String(e)));

let shot = 0;
async function screenshot(name) {
  const file = join(ART, `${String(++shot).padStart(2, "0")}-${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  console.log(`  screenshot ${file}`);
}

const visible = (sel) => page.$$eval(sel, (rows) => rows.filter((r) => !r.hidden).map((r) => ({ ...r.dataset })));
async function waitRow(sel, ms) {
  try {
    await page.waitForSelector(sel, { state: "attached", timeout: ms });
    return true;
  } catch {
    return false;
  }
}
// When the page added each stream row (by seq), measured in the page.
const arrivals = () => page.evaluate(() => window.__arrivals);

async function exec(task, body) {
  const r = await d.call("POST", `/v1/tasks/${task}/exec`, body);
  if (r.status !== 200) throw new Error(`exec: ${r.status} ${r.text}`);
  return r.json;
}

try {
  // --- the page loads, takes the token from the fragment, goes live -------
  await page.goto(d.url);
  const loaded = await waitRow('body[data-ready="1"]', 10000);
  check(loaded, "the page loads and authenticates with the token from the URL fragment");
  check(await waitRow('#conn[data-state="live"]', 10000), "the live stream connects (WebSocket, token subprotocol)");
  check(!page.url().includes("token="), "the token is removed from the address bar", page.url());
  await page.evaluate(() => {
    window.__arrivals = {};
    new MutationObserver((muts) => {
      for (const m of muts)
        for (const n of m.addedNodes) if (n.dataset && n.dataset.seq) window.__arrivals[n.dataset.seq] ??= Date.now();
    }).observe(document.getElementById("stream-rows"), { childList: true });
  });
  await screenshot("loaded");

  // --- a denial through the API -------------------------------------------
  // Task A: sh may create anywhere in its work directory by its rules; the
  // task's grant confines creation to out/. Creating b.txt is denied.
  const a = await d.call("POST", "/v1/tasks", {
    tools: ["sh"], label: "browser test: grant confines creation",
    grant: { files: [{ path: "${workdir}/out", rights: ["create", "write"] }] },
  });
  check(a.status === 201 || a.status === 200, "task A created", a.text);
  const A = a.json.id;
  mkdirSync(join(a.json.workdir, "out"));
  chownSync(join(a.json.workdir, "out"), 65534, 65534);
  const denied = await exec(A, { tool: "sh", argv: ["sh", "-c", "echo b > b.txt"] });
  const tExecDone = Date.now();
  check(denied.exit_status !== 0, "the run outside the grant fails", JSON.stringify(denied.report?.layers ?? denied).slice(0, 400));
  const allowed = await exec(A, { tool: "sh", argv: ["sh", "-c", "echo a > out/a.txt"] });
  check(allowed.exit_status === 0, "control: the same tool creates inside the grant", allowed.stderr);

  // the run's exit record reaches the page within the budget
  const exitSel = `#stream-rows tr[data-kind="run_exit"][data-task="${A}"]`;
  check(await waitRow(exitSel, Math.max(1, STREAM_BUDGET_MS - (Date.now() - tExecDone))), "the denied run's exit record appears in the live stream");

  // the denial's decision record: recorded by the kernel layer, in the store,
  // and on the page within one second of the decision
  const deny = await d.call("GET", `/v1/audit?task=${A}&kind=decision&decision=deny&run=${denied.run_id}`);
  const denyRows = deny.json?.rows ?? [];
  check(denyRows.length > 0, "the denied run has a deny decision record in the audit store (kernel layer)",
    `exec denials: ${JSON.stringify(denied.denials)}; decisions: ${JSON.stringify(denied.decisions)}`);
  let denyRow = denyRows[0];
  if (denyRow) {
    const sel = `#stream-rows tr[data-seq="${denyRow.seq}"]`;
    const shown = await waitRow(sel, STREAM_BUDGET_MS);
    const arr = (await arrivals())[String(denyRow.seq)];
    const latency = arr ? arr - denyRow.ts_ns / 1e6 : NaN;
    check(shown && latency <= STREAM_BUDGET_MS, `the deny decision (seq ${denyRow.seq}) appears in the live stream within ${STREAM_BUDGET_MS} ms of the decision`,
      `shown ${shown}, ${latency.toFixed?.(0)} ms after the decision`);
    console.log(`  figure: decision to page ${latency.toFixed(0)} ms`);
    const cls = await page.$eval(sel, (r) => r.className).catch(() => "");
    check(/dec-deny/.test(cls), "the denial row is coloured as a denial", cls);
  }
  await screenshot("stream-denial");

  // --- a filter narrows the stream -----------------------------------------
  const b = await d.call("POST", "/v1/tasks", { tools: ["cat"], label: "browser test: other task" });
  const B = b.json.id;
  await exec(B, { tool: "cat", argv: ["cat", "/etc/passwd"] });
  check(await waitRow(`#stream-rows tr[data-kind="run_exit"][data-task="${B}"]`, 2000), "task B's run shows in the stream");
  const before = await visible("#stream-rows tr");
  await page.fill("#f-task", String(A));
  await page.click("#f-apply");
  await page.waitForSelector('#conn[data-state="live"]', { timeout: 5000 });
  const afterTask = await visible("#stream-rows tr");
  check(afterTask.length > 0 && afterTask.length < before.length && afterTask.every((r) => r.task === String(A)),
    `the task filter narrows the stream to task ${A}`, `${before.length} -> ${afterTask.length} rows`);
  // the server narrows the live stream too: a new run of task B never arrives
  const seqBefore = Object.keys(await arrivals()).length;
  const bRun = await exec(B, { tool: "cat", argv: ["cat", "/etc/hostname"] });
  await sleep(700);
  const bRows = await page.$$(`#stream-rows tr[data-task="${B}"][data-kind="run_start"]`);
  const bRowsForRun = await page.$$eval(`#stream-rows tr[data-task="${B}"]`, (rs, run) => rs.filter((r) => r.cells[5]?.textContent === String(run)).length, bRun.run_id);
  check(bRowsForRun === 0, "the filtered WebSocket does not deliver task B's new run", `${bRows.length} rows of B, ${bRowsForRun} of the new run; ${seqBefore} rows before`);
  await page.selectOption("#f-decision", "deny");
  await page.waitForSelector('#conn[data-state="live"]', { timeout: 5000 });
  const afterDeny = await visible("#stream-rows tr");
  check(afterDeny.length > 0 && afterDeny.every((r) => r.decision === "deny" && r.task === String(A)),
    "task + decision=deny filters leave only the task's denials", JSON.stringify(afterDeny.slice(0, 5)));
  await screenshot("stream-filtered");
  await page.click("#f-clear");
  await page.waitForSelector('#conn[data-state="live"]', { timeout: 5000 });

  // --- pause holds rows back ----------------------------------------------
  await page.click("#stream-pause");
  const paused = await exec(A, { tool: "sh", argv: ["sh", "-c", "ls out"] });
  await sleep(700);
  const heldText = await page.textContent("#stream-held");
  const pausedRow = `#stream-rows tr[data-kind="run_exit"][data-task="${A}"]:nth-child(1)`;
  const firstExitRun = await page.$eval(pausedRow, (r) => r.cells[5]?.textContent).catch(() => "");
  check(/paused: [1-9]\d* new/.test(heldText ?? "") && firstExitRun !== String(paused.run_id), "pause holds new rows back", heldText);
  await page.click("#stream-pause");
  const resumed = await page.$$eval(`#stream-rows tr[data-kind="run_exit"]`, (rs, run) => rs.some((r) => r.cells[5]?.textContent === String(run)), paused.run_id);
  check(resumed, "resume shows the held rows");

  // --- the task view: epochs, runs, the denial's rule and grant --------------
  await page.click("#nav-tasks");
  await page.waitForSelector(`#task-list a[data-task="${A}"]`, { timeout: 5000 });
  await page.click(`#task-list a[data-task="${A}"]`);
  await page.waitForSelector(`.task-detail[data-task="${A}"]`, { timeout: 5000 });
  check((await page.$$("#epoch-timeline .epoch")).length >= 1, "the task view draws the policy epochs on a timeline");
  const runIds = await page.$$eval("#task-runs tr", (rs) => rs.map((r) => r.dataset.run));
  check(runIds.includes(String(denied.run_id)) && runIds.includes(String(allowed.run_id)), "the task view lists the task's runs", runIds.join(","));
  const apiDenials = (await d.call("GET", `/v1/tasks/${A}/denials`)).json?.denials ?? [];
  // the rule's file:line: recorded with the decision, or the rule the policy
  // decides it with, or (a grant denial) the tool's rule the grant leaves out
  const whereOf = (x) => {
    if (x.record?.rule?.file) return `${x.record.rule.file}:${x.record.rule.line}`;
    for (const t of [x.denial?.rule, x.denial?.grant_would_allow?.tool_rule]) {
      const m = /(\S+\.yaml:\d+)/.exec(t ?? "");
      if (m) return m[1];
    }
    return null;
  };
  const withRule = apiDenials.find(whereOf);
  check(!!withRule, "the task's denials name a rule's file:line (GET /v1/tasks/{id}/denials)", JSON.stringify(apiDenials).slice(0, 600));
  const denialText = await page.$$eval("#task-denials tr", (rs) => rs.map((r) => r.textContent ?? ""));
  if (withRule) {
    const where = whereOf(withRule);
    check(denialText.some((t) => t.includes(where)), `the task view shows the rule ${where}`, denialText.join("\n").slice(0, 400));
    if (withRule.record.rule?.text) check(denialText.some((t) => t.includes(withRule.record.rule.text)), "the task view shows the rule's text");
  }
  const withGrant = apiDenials.find((x) => x.denial?.grant_would_allow);
  check(!!withGrant, "a denial of task A names the grant that would allow it", JSON.stringify(apiDenials).slice(0, 400));
  if (withGrant) {
    const path = withGrant.denial.grant_would_allow.grant?.files?.[0]?.path ?? "";
    const grantCells = await page.$$eval("#task-denials td.grant-cell", (cs) => cs.map((c) => c.textContent ?? ""));
    check(path !== "" && grantCells.some((t) => t.includes(path) && /would allow/.test(t)), `the task view shows the grant that would allow it (${path})`, grantCells.join("\n").slice(0, 400));
  }
  await screenshot("task-view");

  // --- host enforcement ---------------------------------------------------
  await page.click("#nav-host");
  await page.waitForSelector("#host-layers tr", { timeout: 5000 });
  const health = (await d.call("GET", "/v1/health")).json;
  const layerRows = await page.$$eval("#host-layers tr", (rs) => rs.map((r) => [r.dataset.layer, r.querySelector(".state")?.textContent]));
  const expected = Object.entries(health.host.layers).map(([k, v]) => [k, v.state]);
  check(JSON.stringify(layerRows.sort()) === JSON.stringify(expected.sort()), "the host view shows every layer's state from /v1/health", JSON.stringify(layerRows));
  const selfRows = await page.$$eval("#host-self tr", (rs) => rs.map((r) => [r.dataset.prop, r.querySelector(".state")?.textContent]));
  const selfExpected = Object.entries(health.host.hardening?.self?.properties ?? {}).map(([k, v]) => [k, v ? "yes" : "no"]);
  check(selfExpected.length >= 6 && JSON.stringify(selfRows.sort()) === JSON.stringify(selfExpected.sort()),
    "the host view shows agentd's own hardening, property by property, from /v1/health", JSON.stringify(selfRows));
  const privRows = await page.$$eval("#host-privilege tr", (rs) => rs.map((r) => [r.dataset.cap, r.querySelector(".state")?.textContent]));
  const held = new Set(health.host.hardening?.privilege?.now?.effective ?? []);
  const privExpected = (health.host.hardening?.privilege?.kept ?? []).map((k) => [k.name, held.has(k.name) ? "held" : "not held"]);
  check(privExpected.length >= 5 && JSON.stringify(privRows) === JSON.stringify(privExpected),
    "the host view shows the capabilities agentd keeps, each held or not, from /v1/health", JSON.stringify(privRows));
  await screenshot("host");

  // --- counters and charts ---------------------------------------------------
  await page.click("#nav-charts");
  check(await waitRow("#chart-rates canvas", 6000), "the decisions-per-second chart (uPlot) is drawn");
  await page.waitForFunction(() => document.querySelectorAll("#top-rules tr").length > 0, null, { timeout: 8000 }).catch(() => {});
  const runsCard = await page.$eval('.card[data-metric="runs"] .value', (e) => Number(e.textContent.replace(/\D/g, ""))).catch(() => -1);
  check(runsCard >= 5, "the runs counter counts the runs made", runsCard);
  const topRules = await page.$$eval("#top-rules tr.dec-deny", (rs) => rs.length);
  check(topRules >= 1, "top denied rules lists the denials' rules", topRules);
  await screenshot("charts");

  // --- audit search pages ------------------------------------------------------
  for (let i = 0; i < 6; i++) await exec(B, { tool: "cat", argv: ["cat", "/etc/hostname"] });
  await page.click("#nav-audit");
  await page.selectOption("#a-limit", "25");
  await page.click("#audit-search");
  await page.waitForSelector("#audit-rows tr[data-seq]", { timeout: 5000 });
  const page1 = await page.$$eval("#audit-rows tr[data-seq]", (rs) => rs.map((r) => Number(r.dataset.seq)));
  check(page1.length === 25, "audit search shows a page of 25", page1.length);
  await page.click("#audit-next");
  await page.waitForFunction((first) => Number(document.querySelector("#audit-rows tr[data-seq]")?.dataset.seq) !== first, page1[0], { timeout: 5000 }).catch(() => {});
  const page2 = await page.$$eval("#audit-rows tr[data-seq]", (rs) => rs.map((r) => Number(r.dataset.seq)));
  check(page2.length > 0 && Math.min(...page2) > Math.max(...page1), "the next page continues after the first (keyset paging)", `${page1.at(-1)} -> ${page2[0]}`);
  await screenshot("audit-page2");
  await page.click("#audit-prev");
  await page.waitForFunction((first) => Number(document.querySelector("#audit-rows tr[data-seq]")?.dataset.seq) === first, page1[0], { timeout: 5000 }).catch(() => {});
  const back = await page.$$eval("#audit-rows tr[data-seq]", (rs) => rs.map((r) => Number(r.dataset.seq)));
  check(JSON.stringify(back) === JSON.stringify(page1), "previous returns to the first page");
  await page.fill("#a-task", String(B));
  await page.selectOption("#a-kind", "run_exit");
  await page.click("#audit-search");
  await page.waitForFunction(() => [...document.querySelectorAll("#audit-rows tr[data-seq]")].every((r) => r.dataset.kind === "run_exit" || r.cells[2].textContent === "run_exit"), null, { timeout: 5000 }).catch(() => {});
  const filtered = await page.$$eval("#audit-rows tr[data-seq]", (rs) => rs.map((r) => r.cells[2].textContent + "/" + r.cells[4].textContent));
  check(filtered.length >= 8 && filtered.every((x) => x === `run_exit/${B}`), "audit search filters by task and kind", filtered.join(" "));

  // --- replay a candidate rule file ---------------------------------------------
  await page.click("#nav-replay");
  await page.waitForFunction(() => document.querySelectorAll("#r-tool option").length > 0, null, { timeout: 5000 });
  await page.selectOption("#r-tool", "cat");
  await page.waitForFunction(() => document.querySelector("#r-rules").value.includes("tool: cat"), null, { timeout: 5000 });
  const current = await page.inputValue("#r-rules");
  const candidate = current.replace('read: ["${workdir}"]', 'read: ["${workdir}", /etc/passwd]');
  check(candidate !== current, "the candidate widens cat's reads to /etc/passwd");
  await page.fill("#r-rules", candidate);
  await page.click("#replay-run");
  await page.waitForSelector("#replay-summary, #replay-error", { timeout: 15000 });
  const diffAdds = await page.$$eval("#replay-diff .add", (e) => e.map((x) => x.textContent));
  check(diffAdds.some((t) => t.includes("/etc/passwd")), "replay shows the candidate's text differences", diffAdds.join("\n"));
  const changes = await page.$$eval("#replay-changes tr.change", (rs) => rs.map((r) => r.textContent ?? ""));
  check(changes.some((t) => t.includes("/etc/passwd") && t.includes("deny → allow")), "replay lists the recorded denial of /etc/passwd the candidate would allow",
    (await page.textContent("#replay-result"))?.slice(0, 400));
  await screenshot("replay");

  // --- learning mode: propose rules for what cat was refused, take them as the candidate
  await page.click("#propose-run");
  await page.waitForSelector("#propose-summary, #propose-error", { timeout: 15000 });
  const proposal = (await page.textContent("#propose-rules").catch(() => "")) ?? "";
  check(proposal.includes("extends: cat") && proposal.includes('- /etc/passwd'), "the proposal extends cat's rules with the refused /etc/passwd",
    (await page.textContent("#replay-result"))?.slice(0, 400));
  await page.click("#propose-use");
  check((await page.inputValue("#r-rules")) === proposal, "the proposal becomes the replay candidate");
  await screenshot("propose");

  // --- unusual runs: a finding against the tool's behaviour profile ----------------
  const w = await d.call("POST", "/v1/tasks", { tools: ["watched"], label: "browser test: behaviour profile" });
  check(w.status === 201 || w.status === 200, "task W (tool watched: profile learn 3, respond record) created", w.text);
  const W = w.json.id;
  for (let i = 1; i <= 3; i++) {
    const r = await exec(W, { tool: "watched", argv: ["sh", "-c", "echo hi"] });
    check(r.exit_status === 0 && r.profile?.learning === true && (r.profile?.findings ?? []).length === 0,
      `learning run ${i} of watched is learned, no finding`, JSON.stringify(r.profile));
  }
  const MSG = "first-time binary /usr/bin/ls in 3 runs";
  const odd = await exec(W, { tool: "watched", argv: ["sh", "-c", "ls >/dev/null; echo hi"] });
  check((odd.profile?.findings ?? []).some((f) => f.message === MSG), `the 4th run (runs ls) has the finding "${MSG}"`, JSON.stringify(odd.profile));
  const findingRows = (await d.call("GET", "/v1/audit?kind=finding&tool=watched")).json?.rows ?? [];
  const finding = findingRows.find((r) => r.run_id === odd.run_id);
  check(!!finding, "the finding is an audit record of kind finding", JSON.stringify(findingRows).slice(0, 400));
  const runsOf = async () => (await d.call("GET", "/v1/profiles/watched")).json?.runs;
  check((await runsOf()) === 3, "the profile of watched holds its 3 learned runs (the unusual run is not learned)");
  // it arrived live while the view was not shown: a count on the view's button
  let badge = "";
  try {
    await page.waitForSelector("#nav-unusual-count:not([hidden])", { timeout: 3000 });
    badge = (await page.textContent("#nav-unusual-count")) ?? "";
  } catch { /* checked below */ }
  check(badge === "1", "the Unusual button counts the finding that arrived live", badge);

  await page.click("#nav-unusual");
  const seq = finding?.seq ?? 0;
  const fsel = `#finding-rows tr.finding[data-seq="${seq}"]`;
  check(await waitRow(fsel, 5000), `the Unusual view lists the finding (seq ${seq})`, (await page.textContent("#view-unusual"))?.slice(0, 400));
  const cells = await page.$eval(fsel, (r) => [...r.cells].map((c) => c.textContent ?? "")).catch(() => []);
  check(cells[2] === "watched" && cells[3] === String(W) && cells[4] === String(odd.run_id) && cells[5] === "recorded" && cells[6]?.includes(MSG),
    "the finding's row shows its tool, task, run, response and summary", JSON.stringify(cells));
  check((await page.$eval(`${fsel} details`, (e) => e.open).catch(() => null)) === false, "the evidence starts folded");
  await page.click(`${fsel} summary`);
  check(await page.isVisible(`${fsel} .evidence-body`), "the evidence unfolds");
  const ev = await page.$$eval(`${fsel} tr.finding-item`, (rs) => rs.map((r) => ({ feature: r.dataset.feature, kind: r.dataset.kind, cells: [...r.cells].map((c) => c.textContent) })));
  // ls also reads where the tool never read and makes system calls it never made: findings of their own.
  const execRow = ev.find((e) => e.feature === "exec");
  check(execRow !== undefined && execRow.kind === "first-time" && execRow.cells[2] === "/usr/bin/ls" && execRow.cells[3] === MSG &&
      ev.filter((e) => e.feature === "exec").length === 1,
    "the evidence names the feature, first-time, the binary and the message", JSON.stringify(ev));
  const measured = await page.$$eval(`${fsel} table.run-features tr[data-feature]`, (rs) => Object.fromEntries(rs.map((r) => [r.dataset.feature, r.cells[1].textContent])));
  check((measured.exec ?? "").includes("/usr/bin/ls") && "wall_ms" in measured, "the evidence shows the run's measurements", JSON.stringify(measured));

  const prow = '#profile-rows tr[data-tool="watched"]';
  check(await waitRow(prow, 5000), "the profiles panel lists watched");
  const pcells = async () => page.$eval(prow, (r) => [...r.cells].map((c) => c.textContent ?? "")).catch(() => []);
  const p0 = await pcells();
  check(p0[1] === "3" && p0[2] === "3" && p0[3] === "scoring" && p0[4] === "no" && p0[5] === "record",
    "the profile of watched: 3 runs of a learn window of 3, scoring, not pinned, respond record", JSON.stringify(p0));
  await page.click(`${prow} a`);
  await page.waitForSelector('.profile-detail[data-tool="watched"]', { timeout: 5000 }).catch(() => {});
  const execSet = await page.$$eval('#profile-sets tr[data-feature="exec"][data-item]', (rs) => rs.map((r) => [r.dataset.item, r.cells[2].textContent]));
  check(execSet.length === 1 && execSet[0][1] === "3" && execSet[0][0] !== "/usr/bin/ls",
    "the learned binaries: the tool's own, seen in 3 runs (ls is not among them)", JSON.stringify(execSet));
  const wall = await page.$eval('#profile-numbers tr[data-feature="wall_ms"]', (r) => [...r.cells].map((c) => c.textContent)).catch(() => []);
  check(wall[4] === "3" && Number(wall[1]) > 0 && Number(wall[2]) >= Number(wall[1]), "the wall-time baseline: median, max over n = 3", JSON.stringify(wall));
  const taskRow = `#profile-tasks tr[data-task="${W}"]`;
  const tcells = await page.$eval(taskRow, (r) => [...r.cells].map((c) => c.textContent ?? "")).catch(() => []);
  check(tcells[1] === "3" && tcells[2] === "scoring", "task W's own profile of watched: 3 runs, scoring (task_learn 3)", JSON.stringify(tcells));
  await screenshot("unusual");

  // a pinned profile learns nothing: Accept is refused with the daemon's reason
  await page.click("#profile-pin");
  check(await waitRow(`${prow}[data-pinned="true"]`, 5000), "Pin pins the profile");
  const acceptBtn = `${fsel} button.accept`;
  const result = `#accept-result-${seq}`;
  await page.click(acceptBtn);
  await page.waitForFunction((sel) => /not accepted/.test(document.querySelector(sel)?.textContent ?? ""), result, { timeout: 5000 }).catch(() => {});
  const refused = (await page.textContent(result)) ?? "";
  check(/409 profile_pinned/.test(refused), "Accept on a pinned profile shows the refusal (409 profile_pinned)", refused);
  check((await runsOf()) === 3, "the refused Accept left the profile at 3 runs");
  await page.click("#profile-unpin");
  check(await waitRow(`${prow}[data-pinned="false"]`, 5000), "Unpin unpins it");

  // Accept teaches the profile the finding's run
  await page.click(acceptBtn);
  await page.waitForFunction((sel) => /^accepted/.test(document.querySelector(sel)?.textContent ?? ""), result, { timeout: 5000 }).catch(() => {});
  const took = (await page.textContent(result)) ?? "";
  check(/accepted: the profile of watched has learned this run \(4 runs/.test(took), "Accept answers with the profile's new run count", took);
  await page.waitForFunction((sel) => document.querySelector(sel)?.cells[1]?.textContent === "4", prow, { timeout: 5000 }).catch(() => {});
  const p1 = await pcells();
  check(p0[1] === "3" && p1[1] === "4", "after Accept the profile's run count goes from 3 to 4 on the page", `${p0[1]} -> ${p1[1]}`);
  check((await runsOf()) === 4, "the daemon's profile of watched has 4 runs");
  await page.waitForFunction(() => !!document.querySelector('#profile-sets tr[data-item="/usr/bin/ls"]'), null, { timeout: 5000 }).catch(() => {});
  const lsSeen = await page.$eval('#profile-sets tr[data-item="/usr/bin/ls"]', (r) => r.cells[2].textContent).catch(() => null);
  check(lsSeen === "1", "the accepted run's binary is in the learned set (seen in 1 run)", String(lsSeen));
  check(await page.$eval(acceptBtn, (b) => b.disabled).catch(() => false), "an accepted finding's button is spent");
  await screenshot("unusual-accepted");

  // Accepted by the tool's profile, ls is still new to task W's own profile:
  // the same command again is a finding of the task's profile alone.
  const TMSG = `first-time binary /usr/bin/ls in 3 runs of task ${W}`;
  const again = await exec(W, { tool: "watched", argv: ["sh", "-c", "ls >/dev/null; echo hi"] });
  const agains = again.profile?.findings ?? [];
  check(agains.some((f) => f.message === TMSG) && agains.every((f) => f.task_id === W),
    `the same run again: "${TMSG}", every finding task W's profile's`, JSON.stringify(again.profile));
  const tfinding = ((await d.call("GET", "/v1/audit?kind=finding&tool=watched")).json?.rows ?? []).find((r) => r.run_id === again.run_id);
  const tsel = `#finding-rows tr.finding[data-seq="${tfinding?.seq ?? 0}"]`;
  check(await waitRow(tsel, 5000), "the task profile's finding arrives in the view");
  await page.click(`${tsel} summary`);
  const tev = await page.$$eval(`${tsel} tr.finding-item[data-feature="exec"]`, (rs) => rs.map((r) => [...r.cells].map((c) => c.textContent)));
  check(tev.length === 1 && tev[0][1] === `first-time (task ${W}'s profile)` && tev[0][2] === "/usr/bin/ls",
    "its evidence says the task's profile found it", JSON.stringify(tev));
  await page.click(`${prow} a`);
  await page.waitForSelector(`#profile-tasks tr[data-task="${W}"] a`, { timeout: 5000 }).catch(() => {});
  await page.click(`#profile-tasks tr[data-task="${W}"] a`);
  await page.waitForSelector("#task-profile-sets tr[data-item]", { timeout: 5000 }).catch(() => {});
  const tset = await page.$$eval('#task-profile-sets tr[data-feature="exec"][data-item]', (rs) => rs.map((r) => [r.dataset.item, r.cells[2].textContent]));
  check(tset.length === 1 && tset[0][1] === "3" && tset[0][0] !== "/usr/bin/ls",
    "task W's learned binaries: the tool's own in its 3 runs, not ls", JSON.stringify(tset));

  // Reset (confirmed in a dialog): the profile learns again from nothing
  page.once("dialog", (dlg) => void dlg.accept());
  await page.click("#profile-reset");
  await page.waitForFunction((sel) => document.querySelector(sel)?.dataset.learning === "true", prow, { timeout: 5000 }).catch(() => {});
  const p2 = await pcells();
  check(p2[1] === "0" && p2[3] === "learning: 0 of 3 runs", "Reset leaves the profile learning from 0 runs", JSON.stringify(p2));
  const after = (await d.call("GET", "/v1/profiles/watched")).json;
  check(after?.runs === 0 && after?.learning === true, "the daemon's profile was reset", JSON.stringify(after));

  // --- respond: narrow: the task's view lists the narrowing, explains the denial it caused, and lifts it
  const nt = await d.call("POST", "/v1/tasks", { tools: ["narrowing"], label: "browser test: narrowing" });
  check(nt.status === 201 || nt.status === 200, "task N (tool narrowing: profile learn 3, respond narrow) created", nt.text);
  const N = nt.json.id;
  for (let i = 1; i <= 3; i++) await exec(N, { tool: "narrowing", argv: ["sh", "-c", "echo hi"] });
  const narrowed = await exec(N, { tool: "narrowing", argv: ["sh", "-c", "ls >/dev/null; echo hi"] });
  check(narrowed.profile?.response === "narrowed" && narrowed.profile?.narrowed?.epoch === 2,
    "the unusual run narrows task N to its profile (epoch 2)", JSON.stringify(narrowed.profile));
  const lsRefused = await exec(N, { tool: "narrowing", argv: ["sh", "-c", "ls"] });
  check(lsRefused.exit_status !== 0 && /Permission denied/.test(lsRefused.stderr ?? ""), "ls is refused under the narrowing",
    JSON.stringify(lsRefused).slice(0, 400));
  await page.click("#nav-tasks");
  await page.click("#tasks-refresh");
  await page.waitForSelector(`#task-list a[data-task="${N}"]`, { timeout: 5000 });
  await page.click(`#task-list a[data-task="${N}"]`);
  await page.waitForSelector(`.task-detail[data-task="${N}"]`, { timeout: 5000 });
  const nrow = '#task-narrowings tr[data-tool="narrowing"]';
  check(await waitRow(nrow, 5000), "the task's view lists the narrowing of its tool");
  const ncells = await page.$eval(nrow, (r) => [...r.cells].map((c) => c.textContent)).catch(() => []);
  check(ncells[1] === String(narrowed.profile?.narrowed?.finding_seq) && /first-time binary \/usr\/bin\/ls/.test(ncells[2] ?? ""),
    "... with the finding that narrowed it", JSON.stringify(ncells));
  check((await page.$$eval(".epoch-narrow", (e) => e.length)) === 1, "the epoch timeline shows the narrow epoch");
  const why = await page.$$eval("#task-denials .narrowing", (e) => e.map((x) => x.textContent));
  check(why.some((w) => /taken away by the narrowing of narrowing to its profile after finding/.test(w ?? "")),
    "the ls denial is explained by the narrowing, not as the tool's rules", JSON.stringify(why));
  await screenshot("task-narrowed");
  await page.click(`${nrow} button.lift`);
  await page.waitForFunction((sel) => !document.querySelector(sel), nrow, { timeout: 5000 }).catch(() => {});
  check(!(await page.$(nrow)), "Lift takes the narrowing off the view");
  const lifted = (await d.call("GET", `/v1/tasks/${N}`)).json;
  check(!lifted?.narrowed && lifted?.epochs?.at(-1)?.reason === "lift", "the daemon's task is no longer narrowed (epoch reason lift)",
    JSON.stringify(lifted?.epochs?.at(-1)));

  check(cspViolations.length === 0, "no Content-Security-Policy violation in the page", cspViolations.join("\n"));
  check(pageErrors.length === 0, "no uncaught error in the page", pageErrors.join("\n"));
} catch (e) {
  check(false, "the browser run completed", e.stack ?? String(e));
  await screenshot("error").catch(() => {});
} finally {
  await ctx.close().catch(() => {});
  await d.stop();
  rmSync(profile, { recursive: true, force: true });
  rmSync(rulesCopy, { recursive: true, force: true });
}
process.exitCode = finish();
