// Unusual runs: where a run departed from its tool's behaviour profile.
// A tool whose rule file has a profile: block learns what its runs usually
// do over its first `learn` runs (binaries, destinations, file areas,
// credential-like files, refused system calls; time, CPU, memory, output,
// processes, denials, decisions); each later run is scored against that and
// a departure is recorded as a finding. This view lists the findings newest
// first with their evidence (what was first-time, what passed its bound and
// by how much, the run's own measurements) and lets an operator accept one:
// the profile learns that run, so the same behaviour is usual from then on.
// Beside them, each tool's profile: its learning window, whether it scores
// or is pinned, what it does on a finding, and what it has learned, with
// Reset, Pin and Unpin. Findings and profile changes arrive live (their own
// WebSocket subscriptions, unaffected by the Live view's filters).
import { AuditRow, getJson, latest, openEvents, postJson, rowOf } from "./api";
import { clear, el, errorText, fmtDate, table } from "./dom";

const MAX_FINDINGS = 200;
const POLL_MS = 15000;

interface ProfileSummary {
  tool: string;
  version: number;
  runs: number;
  learn_runs: number;
  learning: boolean;
  pinned: boolean;
  respond: string;
  task_learn_runs?: number;
}

interface TaskProfileSummary {
  task_id: number;
  runs: number;
  learn_runs: number;
  learning: boolean;
}

type LearnedSets = Record<string, { items: Record<string, number>; overflow: number }>;

interface NumberStats {
  n: number;
  max: number;
  median: number;
  mad: number;
  recent: number[];
}

interface ProfileDetail extends ProfileSummary {
  profile: {
    task_id?: number;
    runs: number;
    sets: LearnedSets;
    numbers: Record<string, NumberStats>;
  };
  tasks?: TaskProfileSummary[];
}

interface Finding {
  feature: string;
  kind: "first-time" | "outlier" | string;
  item?: string;
  value?: number;
  bound?: number;
  message: string;
  task_id?: number;
}

// What a feature's name leaves unsaid (processes, denials and decisions
// are counts and say it themselves).
const FEATURES: Record<string, string> = {
  exec: "binaries run",
  destination: "network destinations",
  file_area: "file areas",
  secret: "credential-like files",
  syscall: "system calls made or refused",
  wall_ms: "wall time (ms)",
  cpu_ms: "CPU time (ms)",
  memory_mib: "peak memory (MiB)",
  output_kib: "output (KiB)",
};

// What a profile does with a run that departs from it.
const RESPONSES: Record<string, string> = {
  record: "record the finding",
  narrow: "narrow the tool to its profile for the rest of the task",
  "require-grant": "hold the tool's runs until a grant",
  stop: "stop the run",
};

export function fmtNum(v: number | undefined | null): string {
  if (v === undefined || v === null || !Number.isFinite(v)) return "";
  if (Number.isInteger(v) || Math.abs(v) >= 100) return v.toFixed(0);
  return String(Number(v.toPrecision(3)));
}

function featureName(f: string): string {
  const w = FEATURES[f];
  return w ? `${f} (${w})` : f;
}

// What a finding's kind cell says: which profile found it.
function findingKind(f: Finding): string {
  return f.task_id ? `${f.kind} (task ${f.task_id}'s profile)` : f.kind;
}

// A profile's learned sets as rows: feature, item, runs seen in, share of runs.
function setRows(body: HTMLTableSectionElement, sets: LearnedSets, runs: number): void {
  const setEntries = Object.entries(sets ?? {}).sort(([a], [b]) => a.localeCompare(b));
  for (const [feature, s] of setEntries) {
    const items = Object.entries(s.items ?? {}).sort(([a, x], [b, y]) => y - x || a.localeCompare(b));
    items.forEach(([item, seen], i) =>
      body.appendChild(
        el(
          "tr",
          { "data-feature": feature, "data-item": item },
          el("td", {}, i === 0 ? featureName(feature) : ""),
          el("td", { class: "object" }, item),
          el("td", { class: "num" }, seen),
          el("td", { class: "small muted" }, runs ? `${Math.round((seen / runs) * 100)}% of runs` : ""),
        ),
      ),
    );
    if (s.overflow)
      body.appendChild(
        el(
          "tr",
          { "data-feature": feature, class: "out-info" },
          el("td", {}, items.length ? "" : featureName(feature)),
          el("td", { class: "small", colspan: 3 }, `${s.overflow} more beyond the items kept: this set is too varied to call a new item unusual`),
        ),
      );
  }
  if (!setEntries.length) body.appendChild(el("tr", {}, el("td", { colspan: 4, class: "muted" }, "nothing learned yet")));
}

function profileState(p: ProfileSummary): string {
  if (p.learning) return `learning: ${p.runs} of ${p.learn_runs} runs`;
  return p.pinned ? "scoring, pinned (learns nothing)" : "scoring";
}

export class UnusualView {
  readonly root: HTMLElement;
  private findings = el("tbody", { id: "finding-rows" });
  private profiles = el("tbody", { id: "profile-rows" });
  private detail = el("div", { id: "profile-detail" });
  private toolSel = el("select", { id: "u-tool", name: "tool" }, el("option", { value: "" }, "any"));
  private status = el("span", { id: "unusual-status", class: "muted" });
  private err = el("p", { class: "error", id: "unusual-error" });
  private selected: string | null = null;
  // a finding is a record that never changes: its row is built once and kept
  // across reloads, with its evidence open or shut and its Accept answer
  private rowBySeq = new Map<number, HTMLTableRowElement>();
  private sockets: WebSocket[] = [];
  private retry = 500;
  private timer = 0;
  private pending = 0;
  private generation = 0;
  private visible = false;
  private unseen = 0;
  // the count of findings that arrived while the view was not shown
  onUnseen: (n: number) => void = () => {};

  constructor() {
    const refresh = el("button", { type: "button", id: "unusual-refresh" }, "Refresh");
    refresh.addEventListener("click", () => void this.refresh());
    this.toolSel.addEventListener("change", () => void this.refresh());
    this.root = el(
      "section",
      { id: "view-unusual", class: "view" },
      el("h2", {}, "Unusual runs ", refresh),
      el(
        "p",
        { class: "small" },
        "Runs that departed from their tool's behaviour profile: a binary, destination, file area, credential-like file or refused system call the profile had never seen, or a measurement beyond its usual bound. Accept teaches the profile that run.",
      ),
      el("div", { class: "filters" }, el("label", {}, "tool ", this.toolSel), this.status),
      this.err,
      el("h3", {}, "Findings (newest first)"),
      table(["time", "seq", "tool", "task", "run", "response", "what was unusual (expand for the evidence)", "accept into the profile"], this.findings, "findings"),
      el("h3", {}, "Profiles"),
      table(["tool", "runs", "learn window", "state", "pinned", "on a finding", "version"], this.profiles, "profiles"),
      this.detail,
    );
  }

  // Subscribes to finding and profile records; called once at page start.
  start(): void {
    this.connect();
  }

  setVisible(v: boolean): void {
    this.visible = v;
    if (v) {
      this.unseen = 0;
      this.onUnseen(0);
      void this.refresh();
      if (!this.timer) this.timer = window.setInterval(() => void this.refresh(), POLL_MS);
    } else if (this.timer) {
      clearInterval(this.timer);
      this.timer = 0;
    }
  }

  private connect(): void {
    for (const ws of this.sockets) {
      ws.onclose = null;
      ws.close();
    }
    this.sockets = ["finding", "profile"].map((kind) => {
      const ws = openEvents({ kind });
      ws.onopen = () => (this.retry = 500);
      ws.onmessage = (m) => {
        const r = rowOf(m);
        if (!r) return;
        if (r.kind === "finding" && !this.visible) this.onUnseen(++this.unseen);
        this.changed();
      };
      ws.onclose = () => {
        if (!this.sockets.includes(ws)) return;
        this.sockets = [];
        setTimeout(() => this.sockets.length === 0 && this.connect(), this.retry);
        this.retry = Math.min(this.retry * 2, 10000);
      };
      return ws;
    });
  }

  // A finding or a profile change arrived: reload now if shown (a burst of
  // records is one reload); a hidden view reloads when shown.
  private changed(): void {
    if (!this.visible || this.pending) return;
    this.pending = window.setTimeout(() => {
      this.pending = 0;
      void this.refresh();
    }, 250);
  }

  async refresh(): Promise<void> {
    const gen = ++this.generation;
    const tool = this.toolSel.value;
    let rows: AuditRow[];
    let list: ProfileSummary[];
    try {
      [rows, list] = await Promise.all([
        latest({ kind: "finding", tool: tool || undefined }, MAX_FINDINGS),
        getJson<{ profiles: ProfileSummary[] }>("/v1/profiles").then((j) => j.profiles),
      ]);
    } catch (e) {
      if (gen === this.generation) this.err.textContent = errorText(e);
      return;
    }
    if (gen !== this.generation) return; // a newer reload is under way
    this.err.textContent = "";
    this.renderTools(list);
    this.renderFindings([...rows].reverse());
    this.renderProfiles(list);
    this.status.textContent = `${rows.length} finding${rows.length === 1 ? "" : "s"}${rows.length >= MAX_FINDINGS ? ` (the newest ${MAX_FINDINGS})` : ""}; ${list.length} tool${list.length === 1 ? "" : "s"} with a profile`;
    if (this.selected !== null) await this.showProfile(this.selected);
  }

  private renderTools(list: ProfileSummary[]): void {
    const cur = this.toolSel.value;
    const names = new Set(list.map((p) => p.tool));
    if (cur) names.add(cur);
    const have = [...this.toolSel.options].map((o) => o.value).filter((v) => v);
    const want = [...names].sort();
    if (JSON.stringify(have) === JSON.stringify(want)) return;
    clear(this.toolSel);
    this.toolSel.appendChild(el("option", { value: "" }, "any"));
    for (const n of want) this.toolSel.appendChild(el("option", { value: n }, n));
    this.toolSel.value = cur;
  }

  private renderFindings(rows: AuditRow[]): void {
    const keep = new Map<number, HTMLTableRowElement>();
    for (const r of rows) keep.set(r.seq, this.rowBySeq.get(r.seq) ?? this.findingRow(r));
    this.rowBySeq = keep;
    clear(this.findings);
    for (const tr of keep.values()) this.findings.appendChild(tr);
    if (!rows.length)
      this.findings.appendChild(el("tr", {}, el("td", { colspan: 8, class: "muted" }, "no findings: every scored run was usual for its tool")));
  }

  private findingRow(r: AuditRow): HTMLTableRowElement {
    const d = r.detail ?? {};
    const response: string = typeof d.response === "string" ? d.response : "";
    const tool = r.tool ?? "";
    const toolLink = el("a", { href: "#", class: "profile-link", "data-tool": tool }, tool);
    toolLink.addEventListener("click", (e) => {
      e.preventDefault();
      void this.showProfile(tool);
    });
    const details = el(
      "details",
      { class: "evidence", "data-seq": r.seq },
      el("summary", { class: "finding-summary" }, typeof d.summary === "string" ? d.summary : "unusual run"),
      evidence(d),
    );
    const result = el("div", { class: "accept-result small", id: `accept-result-${r.seq}` });
    const accept = el("button", { type: "button", class: "accept", "data-seq": r.seq, "data-tool": tool }, "Accept");
    accept.addEventListener("click", () => void this.accept(r.seq, tool, accept, result));
    return el(
      "tr",
      { class: `finding resp-${response || "none"}`, "data-seq": r.seq, "data-tool": tool, "data-response": response },
      el("td", { class: "time" }, fmtDate(r.ts_ns)),
      el("td", { class: "num" }, r.seq),
      el("td", {}, toolLink),
      el("td", { class: "num" }, r.task_id ?? ""),
      el("td", { class: "num" }, r.run_id ?? ""),
      el("td", { class: "response" }, response),
      el("td", { class: "finding-cell" }, details),
      el(
        "td",
        { class: "accept-cell" },
        accept,
        el("div", { class: "small muted" }, d.profile_runs !== undefined ? `scored against ${d.profile_runs} runs (v${d.profile_version ?? "?"})` : ""),
        result,
      ),
    );
  }

  // Accept: the profile learns the finding's run (its recorded features).
  private async accept(seq: number, tool: string, btn: HTMLButtonElement, out: HTMLElement): Promise<void> {
    btn.disabled = true;
    out.classList.remove("error");
    out.textContent = "accepting…";
    try {
      const p = await postJson<ProfileSummary>(`/v1/profiles/${encodeURIComponent(tool)}/accept`, { finding_seq: seq });
      out.textContent = `accepted: the profile of ${p.tool} has learned this run (${p.runs} runs, version ${p.version})`;
      this.selected = tool;
    } catch (e) {
      out.textContent = `not accepted: ${errorText(e)}`;
      out.classList.add("error");
      btn.disabled = false;
    }
    await this.refresh();
  }

  private renderProfiles(list: ProfileSummary[]): void {
    clear(this.profiles);
    for (const p of [...list].sort((a, b) => a.tool.localeCompare(b.tool))) {
      const a = el("a", { href: "#", "data-tool": p.tool }, p.tool);
      a.addEventListener("click", (e) => {
        e.preventDefault();
        void this.showProfile(p.tool);
      });
      this.profiles.appendChild(
        el(
          "tr",
          {
            class: `profile ${p.learning ? "out-info" : "scoring"}${p.tool === this.selected ? " selected" : ""}`,
            "data-tool": p.tool,
            "data-learning": String(p.learning),
            "data-pinned": String(p.pinned),
          },
          el("td", {}, a),
          el("td", { class: "num runs" }, p.runs),
          el("td", { class: "num" }, p.learn_runs),
          el("td", { class: "state" }, profileState(p)),
          el("td", { class: "pinned" }, p.pinned ? "yes" : "no"),
          el("td", { title: RESPONSES[p.respond] ?? "" }, p.respond),
          el("td", { class: "num" }, p.version),
        ),
      );
    }
    if (!list.length)
      this.profiles.appendChild(el("tr", {}, el("td", { colspan: 7, class: "muted" }, "no tool keeps a profile (a rule file's profile: block)")));
  }

  // One tool's profile: what it has learned, with its actions.
  async showProfile(tool: string): Promise<void> {
    this.selected = tool;
    for (const tr of this.profiles.querySelectorAll<HTMLElement>("tr[data-tool]")) tr.classList.toggle("selected", tr.dataset.tool === tool);
    let p: ProfileDetail;
    try {
      p = await getJson<ProfileDetail>(`/v1/profiles/${encodeURIComponent(tool)}`);
    } catch (e) {
      if (this.selected !== tool) return;
      clear(this.detail);
      this.detail.appendChild(el("p", { class: "error" }, `profile of ${tool}: ${errorText(e)}`));
      return;
    }
    if (this.selected !== tool) return;
    // the last action's answer stays while it still describes this version
    const note = this.detail.querySelector<HTMLElement>("#profile-action");
    const keep =
      note && this.detail.dataset.tool === tool && note.dataset.version === String(p.version) ? { text: note.textContent ?? "", cls: note.className } : null;
    clear(this.detail);
    this.detail.dataset.tool = tool;
    this.detail.appendChild(this.renderDetail(p, keep));
  }

  private renderDetail(p: ProfileDetail, keep: { text: string; cls: string } | null): HTMLElement {
    const action = el("p", { id: "profile-action", class: keep?.cls ?? "small", "data-version": p.version }, keep?.text ?? "");
    const button = (id: string, label: string, path: string, confirmText?: string) => {
      const b = el("button", { type: "button", id }, label);
      b.addEventListener("click", async () => {
        if (confirmText && !window.confirm(confirmText)) return;
        b.disabled = true;
        try {
          const s = await postJson<ProfileSummary>(`/v1/profiles/${encodeURIComponent(p.tool)}/${path}`);
          action.className = "small";
          action.dataset.version = String(s.version);
          action.textContent = `${label.toLowerCase()}: ${s.tool} ${profileState(s)}, ${s.runs} runs, version ${s.version}`;
        } catch (e) {
          action.className = "error";
          action.textContent = `${label.toLowerCase()}: ${errorText(e)}`;
        }
        b.disabled = false;
        await this.refresh();
      });
      return b;
    };
    const reset = button("profile-reset", "Reset", "reset", `Reset the profile of ${p.tool}? It forgets what it learned and learns again over the next ${p.learn_runs} runs.`);
    const pin = button("profile-pin", "Pin", "pin");
    const unpin = button("profile-unpin", "Unpin", "unpin");
    pin.hidden = p.pinned;
    unpin.hidden = !p.pinned;

    const sets = el("tbody", { id: "profile-sets" });
    setRows(sets, p.profile?.sets ?? {}, p.runs);

    const numbers = el("tbody", { id: "profile-numbers" });
    const numEntries = Object.entries(p.profile?.numbers ?? {}).sort(([a], [b]) => a.localeCompare(b));
    for (const [feature, s] of numEntries)
      numbers.appendChild(
        el(
          "tr",
          { "data-feature": feature },
          el("td", {}, featureName(feature)),
          el("td", { class: "num median" }, fmtNum(s.median)),
          el("td", { class: "num max" }, fmtNum(s.max)),
          el("td", { class: "num" }, fmtNum(s.mad)),
          el("td", { class: "num n" }, s.n),
          el("td", { class: "small muted" }, (s.recent ?? []).map(fmtNum).join(" ")),
        ),
      );
    if (!numEntries.length) numbers.appendChild(el("tr", {}, el("td", { colspan: 6, class: "muted" }, "nothing learned yet")));

    // Each open task's own profile of the tool (task_learn), its learned sets on demand.
    const taskDetail = el("div", { id: "task-profile" });
    const tasks = el("tbody", { id: "profile-tasks" });
    for (const t of p.tasks ?? []) {
      const show = el("a", { href: "#", class: "task-profile-link", "data-task": t.task_id }, "learned sets");
      show.addEventListener("click", (e) => {
        e.preventDefault();
        void this.showTaskProfile(p.tool, t.task_id, taskDetail);
      });
      tasks.appendChild(
        el(
          "tr",
          { "data-task": t.task_id, "data-learning": String(t.learning) },
          el("td", { class: "num" }, t.task_id),
          el("td", { class: "num" }, t.runs),
          el("td", {}, t.learning ? `learning: ${t.runs} of ${t.learn_runs} runs` : "scoring"),
          el("td", {}, show),
        ),
      );
    }
    if (!(p.tasks ?? []).length) tasks.appendChild(el("tr", {}, el("td", { colspan: 4, class: "muted" }, "no open task has run the tool")));
    const perTask = p.task_learn_runs
      ? [
          el("h4", {}, `Tasks' own profiles (each task's runs of ${p.tool}; scoring once a task ran it ${p.task_learn_runs} times)`),
          table(["task", "runs", "state", ""], tasks, "profile-tasks"),
          taskDetail,
        ]
      : [];

    return el(
      "div",
      { class: "profile-detail", "data-tool": p.tool },
      el("h3", {}, `Profile of ${p.tool}`),
      el(
        "p",
        { class: "small", id: "profile-summary" },
        `${profileState(p)}; ${p.runs} runs learned, learning window ${p.learn_runs}${p.task_learn_runs ? `, each task's own after ${p.task_learn_runs} runs in it` : ""}; on a finding: ${RESPONSES[p.respond] ?? p.respond}; version ${p.version}`,
      ),
      el("div", { class: "filters" }, reset, pin, unpin),
      action,
      el("h4", {}, "Learned sets (an item not here is first-time)"),
      table(["feature", "item", "runs seen in", ""], sets, "profile-sets"),
      el("h4", {}, "Number baselines (a run beyond its bound is an outlier)"),
      table(["feature", "median", "max", "MAD", "runs", "recent"], numbers, "profile-numbers"),
      ...perTask,
    );
  }

  // One task's own profile of the tool: its learned sets.
  private async showTaskProfile(tool: string, task: number, out: HTMLElement): Promise<void> {
    clear(out);
    try {
      const p = await getJson<ProfileDetail>(`/v1/profiles/${encodeURIComponent(tool)}?task=${task}`);
      const body = el("tbody", { id: "task-profile-sets" });
      setRows(body, p.profile?.sets ?? {}, p.profile?.runs ?? 0);
      out.dataset.task = String(task);
      out.appendChild(el("h4", {}, `Task ${task}'s profile of ${tool}: ${p.profile?.runs ?? 0} runs learned`));
      out.appendChild(table(["feature", "item", "runs seen in", ""], body, "task-profile-sets"));
    } catch (e) {
      out.appendChild(el("p", { class: "error" }, `task ${task}'s profile of ${tool}: ${errorText(e)}`));
    }
  }
}

// A finding's evidence: each departure (first-time items; outliers with
// their value against the bound they passed), then the run's measurements.
function evidence(d: any): HTMLElement {
  const body = el("tbody", {});
  const fs: Finding[] = Array.isArray(d.findings) ? d.findings : [];
  for (const f of fs)
    body.appendChild(
      el(
        "tr",
        { class: `finding-item kind-${f.kind}`, "data-feature": f.feature, "data-kind": f.kind, "data-task": f.task_id ?? "" },
        el("td", {}, featureName(f.feature)),
        el("td", {}, findingKind(f)),
        el(
          "td",
          { class: "object" },
          f.kind === "outlier" ? `${fmtNum(f.value)} > bound ${fmtNum(f.bound)}${f.bound ? ` (${fmtNum((f.value ?? 0) / f.bound)}×)` : ""}` : (f.item ?? ""),
        ),
        el("td", { class: "message" }, f.message),
      ),
    );
  const feats = el("tbody", {});
  for (const [k, v] of Object.entries<any>(d.features ?? {}).sort(([a], [b]) => a.localeCompare(b)))
    feats.appendChild(
      el("tr", { "data-feature": k }, el("td", {}, featureName(k)), el("td", { class: "object" }, Array.isArray(v) ? v.join("\n") : fmtNum(Number(v)))),
    );
  return el(
    "div",
    { class: "evidence-body" },
    table(["feature", "kind", "item / value against bound", "message"], body, "evidence"),
    feats.firstChild ? el("h4", {}, "The run's measurements") : null,
    feats.firstChild ? table(["feature", "this run"], feats, "run-features") : null,
  );
}

