// The live stream of decisions and records: newest first, coloured by
// outcome, filtered by task, tool, layer, decision and kind (on the server:
// the WebSocket is reopened with the filters; rows already shown are
// narrowed by the same rules), with a pause that holds new rows back.
import { AuditRow, latest, openEvents, rowOf, ruleWhere } from "./api";
import { append, byId, clear, el, fmtTime, table } from "./dom";

export const LAYERS = ["bpf_lsm", "sock_addr", "sock_create", "monitor", "seccomp", "landlock", "supervisor", "namespace", "cgroup", "sock_unix"];
export const DECISIONS = ["deny", "allow", "audit", "observe"];
export const KINDS = ["decision", "run_start", "run_exit", "policy_epoch", "gap", "host_status", "finding", "profile"];
const MAX_ROWS = 1000;

interface Filters {
  task: string;
  tool: string;
  layer: string;
  decision: string;
  kind: string;
}

// What a record says in one word, for the outcome column and its colour.
export function outcomeOf(r: AuditRow): string {
  switch (r.kind) {
    case "decision":
      return r.decision ?? "";
    case "run_exit": {
      const d = r.detail ?? {};
      if (d.reason === "exit") return d.code === 0 ? "exit 0" : `exit ${d.code}`;
      return `${d.reason ?? "ended"}${d.code !== undefined ? " " + d.code : ""}`;
    }
    case "run_start":
      return "start";
    case "policy_epoch":
      return r.detail?.change ?? "epoch";
    case "gap":
      return `lost ${r.detail?.count ?? (r as any).dropped ?? "?"}`;
    case "host_status":
      return r.detail?.event ?? "host";
    case "finding":
      return "unusual";
    case "profile":
      return r.detail?.change ?? "profile";
    default:
      return r.kind;
  }
}

export function outcomeClass(r: AuditRow): string {
  if (r.kind === "decision") return `dec-${r.decision}`;
  if (r.kind === "run_exit") {
    const d = r.detail ?? {};
    return d.reason === "exit" && d.code === 0 ? "out-ok" : "out-bad";
  }
  if (r.kind === "gap") return "out-gap";
  if (r.kind === "finding") return "out-bad";
  return "out-info";
}

export function summaryOf(r: AuditRow): string {
  if (r.kind === "decision") {
    const why = r.detail?.access ?? r.detail?.syscall ?? "";
    return `${r.object ?? ""}${why && why !== r.object ? ` (${why})` : ""}`;
  }
  const d = r.detail;
  if (!d) return "";
  if (r.kind === "run_start" && Array.isArray(d.argv)) return d.argv.join(" ");
  if (r.kind === "run_exit") return d.outcome ? `${d.outcome}${d.error ? ": " + d.error : ""}` : "";
  if (r.kind === "policy_epoch") return d.epoch !== undefined ? `task epoch ${d.epoch}` : JSON.stringify(d).slice(0, 120);
  if (r.kind === "gap") return `${d.source ?? ""} records lost`;
  if (r.kind === "finding" && typeof d.summary === "string") return d.summary;
  return JSON.stringify(d).slice(0, 160);
}

function matches(r: AuditRow, f: Filters): boolean {
  if (f.kind && r.kind !== f.kind) return false;
  if (f.task && String(r.task_id ?? "") !== f.task) return false;
  if (f.tool && r.tool !== f.tool) return false;
  if (r.kind === "gap") return true;
  if (f.layer && (r.kind !== "decision" || r.layer !== f.layer)) return false;
  if (f.decision && (r.kind !== "decision" || r.decision !== f.decision)) return false;
  return true;
}

export class StreamView {
  readonly root: HTMLElement;
  private tbody = el("tbody", { id: "stream-rows" });
  private rows: { r: AuditRow; tr: HTMLTableRowElement }[] = []; // newest first
  private held: AuditRow[] = [];
  private paused = false;
  private ws: WebSocket | null = null;
  private seen = new Set<number>();
  private filters: Filters = { task: "", tool: "", layer: "", decision: "", kind: "" };
  private pauseBtn = el("button", { id: "stream-pause", type: "button" }, "Pause");
  private heldInfo = el("span", { id: "stream-held", class: "muted" });
  private countInfo = el("span", { id: "stream-count", class: "muted" });
  private retry = 500;
  onTask: (id: number) => void = () => {};
  onState: (s: "live" | "down" | "connecting") => void = () => {};

  constructor() {
    const sel = (id: string, label: string, values: string[]) =>
      el("label", {}, label, " ", el("select", { id, name: id }, el("option", { value: "" }, "any"), ...values.map((v) => el("option", { value: v }, v))));
    const form = el(
      "form",
      { id: "stream-filters", class: "filters" },
      el("label", {}, "task ", el("input", { id: "f-task", name: "task", inputmode: "numeric", size: 5 })),
      el("label", {}, "tool ", el("input", { id: "f-tool", name: "tool", size: 10 })),
      sel("f-layer", "layer", LAYERS),
      sel("f-decision", "decision", DECISIONS),
      sel("f-kind", "kind", KINDS),
      el("button", { type: "submit", id: "f-apply" }, "Apply"),
      el("button", { type: "button", id: "f-clear" }, "Clear"),
      this.pauseBtn,
      this.heldInfo,
      this.countInfo,
    );
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      this.readFilters();
    });
    form.querySelectorAll("select").forEach((s) => s.addEventListener("change", () => this.readFilters()));
    form.querySelector("#f-clear")!.addEventListener("click", () => {
      form.reset();
      this.readFilters();
    });
    this.pauseBtn.addEventListener("click", () => this.setPaused(!this.paused));
    this.root = el(
      "section",
      { id: "view-stream", class: "view" },
      el("h2", {}, "Live decisions"),
      form,
      table(["time", "seq", "kind", "outcome", "task", "run", "tool", "layer", "op", "object / detail", "rule"], this.tbody, "stream"),
    );
  }

  async start(): Promise<void> {
    try {
      const recent = await latest({}, 100);
      for (const r of recent) this.add(r);
    } catch {
      /* the stream still starts */
    }
    this.connect();
  }

  private readFilters(): void {
    const v = (id: string) => (byId<HTMLInputElement | HTMLSelectElement>(id).value ?? "").trim();
    this.filters = { task: v("f-task"), tool: v("f-tool"), layer: v("f-layer"), decision: v("f-decision"), kind: v("f-kind") };
    for (const { r, tr } of this.rows) tr.hidden = !matches(r, this.filters);
    this.held = this.held.filter((r) => matches(r, this.filters));
    this.updateInfo();
    this.connect();
  }

  private setPaused(p: boolean): void {
    this.paused = p;
    this.pauseBtn.textContent = p ? "Resume" : "Pause";
    this.pauseBtn.classList.toggle("active", p);
    if (!p) {
      for (const r of this.held) this.add(r);
      this.held = [];
    }
    this.updateInfo();
  }

  private updateInfo(): void {
    this.heldInfo.textContent = this.paused ? `paused: ${this.held.length} new held back` : "";
    const shown = this.rows.filter((x) => !x.tr.hidden).length;
    this.countInfo.textContent = `${shown} shown`;
  }

  private connect(): void {
    if (this.ws) {
      this.ws.onclose = null;
      this.ws.close();
    }
    const f: Record<string, string> = {};
    for (const [k, v] of Object.entries(this.filters)) if (v) f[k] = v;
    this.onState("connecting");
    const ws = openEvents(f);
    this.ws = ws;
    ws.onopen = () => {
      this.retry = 500;
      this.onState("live");
    };
    ws.onmessage = (m) => {
      let r = rowOf(m);
      if (!r) return;
      if (r.kind === "gap" && r.seq === undefined) r = { ...r, seq: 0, ts_ns: Date.now() * 1e6 };
      if (this.paused) {
        this.held.push(r);
        this.updateInfo();
      } else this.add(r);
    };
    ws.onclose = () => {
      if (this.ws !== ws) return;
      this.onState("down");
      setTimeout(() => this.ws === ws && this.connect(), this.retry);
      this.retry = Math.min(this.retry * 2, 10000);
    };
  }

  private add(r: AuditRow): void {
    if (r.seq && this.seen.has(r.seq)) return;
    if (r.seq) this.seen.add(r.seq);
    const task = r.task_id
      ? el("a", { href: "#", class: "task-link", "data-task": r.task_id }, String(r.task_id))
      : "";
    if (task instanceof HTMLElement)
      task.addEventListener("click", (e) => {
        e.preventDefault();
        this.onTask(r.task_id!);
      });
    const rule = r.rule ? el("span", { class: "rule", title: r.rule.text ?? "" }, ruleWhere(r.rule)) : "";
    const tr = el(
      "tr",
      {
        class: `row kind-${r.kind} ${outcomeClass(r)}`,
        "data-seq": r.seq,
        "data-kind": r.kind,
        "data-decision": r.decision ?? "",
        "data-task": r.task_id ?? "",
        "data-tool": r.tool ?? "",
        "data-layer": r.layer ?? "",
      },
      el("td", { class: "time" }, fmtTime(r.ts_ns)),
      el("td", { class: "num" }, r.seq || ""),
      el("td", {}, r.kind),
      el("td", { class: "outcome" }, outcomeOf(r)),
      el("td", {}, task),
      el("td", { class: "num" }, r.run_id ?? ""),
      el("td", {}, r.tool ?? ""),
      el("td", {}, r.layer ?? ""),
      el("td", {}, r.op ?? ""),
      el("td", { class: "object" }, summaryOf(r)),
      el("td", {}, rule),
    );
    tr.hidden = !matches(r, this.filters);
    // newest first: by seq, so a backfilled row lands in its place
    let i = 0;
    while (i < this.rows.length && (this.rows[i].r.seq || Infinity) > (r.seq || Infinity)) i++;
    const before = this.rows[i]?.tr ?? null;
    this.tbody.insertBefore(tr, before);
    this.rows.splice(i, 0, { r, tr });
    while (this.rows.length > MAX_ROWS) {
      const old = this.rows.pop()!;
      old.tr.remove();
      this.seen.delete(old.r.seq);
    }
    this.updateInfo();
  }

  clearRows(): void {
    clear(this.tbody);
    this.rows = [];
    this.seen.clear();
    append(this.tbody);
  }
}
