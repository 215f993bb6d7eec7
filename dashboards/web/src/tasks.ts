// Tasks: the list, and per task its policy epochs on a timeline, the tools
// its behaviour profiles narrowed (respond: narrow, each with a Lift), its
// runs and their exits (with the hardening each run had), and its denials
// with the deciding rule's file:line and text and the grant that would allow
// it, or the narrowing that took it away.
import { AuditRow, deleteJson, getJson, latest, ruleWhere } from "./api";
import { clear, el, errorText, fmtDate, fmtDuration, fmtTime, table } from "./dom";
import { layersText } from "./host";

interface Epoch {
  epoch: number;
  policy_version: number;
  grant: unknown;
  started_ns: number;
  ended_ns: number | null;
  expires_ns: number | null;
  reason: string;
}
interface Run {
  run_id: number;
  tool: string;
  argv: string[];
  epoch: number;
  started_ns: number;
  ended_ns: number | null;
  exit_status: number | null;
  outcome: string;
}
// What a tool's profile narrowed in the task (GET /v1/tasks/{id} `narrowed`).
interface Narrowing {
  finding_seq: number;
  run_id: number;
  summary: string;
  profile: string;
  profile_runs: number;
  kept: number;
  narrowed: number;
  dropped: number;
}
interface TaskDetail {
  id: number;
  narrowed?: Record<string, Narrowing>;
  label: string;
  workdir: string;
  tools: string[];
  state: string;
  epoch: number;
  created_ns: number;
  epochs: Epoch[];
  runs: Run[];
}
interface Denial {
  record: AuditRow;
  denial: null | {
    rule: string | null;
    explanation?: string;
    grant_would_allow: null | { message: string; tool_rule?: string; grant: unknown };
    narrowing?: Narrowing;
  };
}

export class TasksView {
  readonly root: HTMLElement;
  private list = el("tbody", { id: "task-list" });
  private detail = el("div", { id: "task-detail" });
  private current: number | null = null;

  constructor() {
    const refresh = el("button", { type: "button", id: "tasks-refresh" }, "Refresh");
    refresh.addEventListener("click", () => this.refresh());
    this.root = el(
      "section",
      { id: "view-tasks", class: "view" },
      el("h2", {}, "Tasks ", refresh),
      table(["id", "label", "tools", "state", "epoch", "runs", "running", "created"], this.list, "tasks"),
      this.detail,
    );
  }

  async refresh(): Promise<void> {
    try {
      const j = await getJson<{ tasks: any[] }>("/v1/tasks");
      clear(this.list);
      for (const t of [...j.tasks].reverse()) {
        const a = el("a", { href: "#", "data-task": t.id }, String(t.id));
        a.addEventListener("click", (e) => {
          e.preventDefault();
          void this.show(t.id);
        });
        this.list.appendChild(
          el(
            "tr",
            { class: t.id === this.current ? "selected" : "" },
            el("td", {}, a),
            el("td", {}, t.label ?? ""),
            el("td", {}, (t.tools ?? []).join(", ")),
            el("td", {}, t.state),
            el("td", { class: "num" }, t.epoch),
            el("td", { class: "num" }, t.runs),
            el("td", { class: "num" }, t.running),
            el("td", {}, fmtDate(t.created_ns)),
          ),
        );
      }
    } catch (e) {
      clear(this.list);
      this.list.appendChild(el("tr", {}, el("td", { colspan: 8, class: "error" }, errorText(e))));
    }
    if (this.current !== null) await this.show(this.current);
  }

  async show(id: number): Promise<void> {
    this.current = id;
    clear(this.detail);
    this.detail.appendChild(el("p", { class: "muted" }, `loading task ${id}…`));
    try {
      const [t, den, exits] = await Promise.all([
        getJson<TaskDetail>(`/v1/tasks/${id}`),
        getJson<{ denials: Denial[]; next_after_seq: number | null }>(`/v1/tasks/${id}/denials?limit=200`),
        latest({ task: id, kind: "run_exit" }, 200),
      ]);
      clear(this.detail);
      this.detail.appendChild(this.render(t, den.denials, exits));
    } catch (e) {
      clear(this.detail);
      this.detail.appendChild(el("p", { class: "error" }, `task ${id}: ${errorText(e)}`));
    }
  }

  private render(t: TaskDetail, denials: Denial[], exits: AuditRow[]): HTMLElement {
    const now = Date.now() * 1e6;
    const t0 = t.created_ns;
    const t1 = Math.max(now, ...t.epochs.map((e) => e.ended_ns ?? now));
    const span = Math.max(1, t1 - t0);
    // epochs timeline: one bar per epoch, runs as ticks beneath
    const lane = el("div", { class: "timeline", id: "epoch-timeline" });
    for (const e of t.epochs) {
      const end = e.ended_ns ?? now;
      const bar = el(
        "div",
        { class: `epoch epoch-${e.reason}`, "data-epoch": e.epoch, title: `epoch ${e.epoch} (${e.reason}), policy v${e.policy_version}\n${JSON.stringify(e.grant)}` },
        `#${e.epoch} ${e.reason}${e.grant ? " (grant)" : ""}`,
      );
      bar.style.left = `${((e.started_ns - t0) / span) * 100}%`;
      bar.style.width = `${Math.max(0.5, ((end - e.started_ns) / span) * 100)}%`;
      lane.appendChild(bar);
    }
    const runsLane = el("div", { class: "timeline runs-lane" });
    for (const r of t.runs) {
      const tick = el("div", { class: `run-tick ${r.exit_status === 0 ? "out-ok" : r.ended_ns ? "out-bad" : "out-info"}`, title: `run ${r.run_id} ${r.tool}: ${r.outcome}` });
      tick.style.left = `${((r.started_ns - t0) / span) * 100}%`;
      tick.style.width = `${Math.max(0.3, (((r.ended_ns ?? now) - r.started_ns) / span) * 100)}%`;
      runsLane.appendChild(tick);
    }
    const exitBy = new Map<number, AuditRow>();
    for (const x of exits) if (x.run_id) exitBy.set(x.run_id, x);
    const runs = el("tbody", { id: "task-runs" });
    for (const r of [...t.runs].reverse()) {
      const x = exitBy.get(r.run_id)?.detail;
      const hard: string[] = Array.isArray(x?.hardening) ? x.hardening : [];
      runs.appendChild(
        el(
          "tr",
          { class: r.exit_status === 0 ? "out-ok" : r.ended_ns ? "out-bad" : "out-info", "data-run": r.run_id },
          el("td", { class: "num" }, r.run_id),
          el("td", {}, r.tool),
          el("td", { class: "object" }, r.argv.join(" ")),
          el("td", { class: "num" }, r.epoch),
          el("td", {}, fmtTime(r.started_ns)),
          el("td", {}, r.ended_ns ? fmtDuration(r.ended_ns - r.started_ns) : "running"),
          el("td", {}, r.outcome),
          el("td", { class: "num" }, r.exit_status ?? ""),
          el("td", { class: "small" }, layersText(x)),
          el("td", { class: "small" }, hard.join("; ")),
        ),
      );
    }
    const narrowings = el("tbody", { id: "task-narrowings" });
    for (const [tool, n] of Object.entries(t.narrowed ?? {})) {
      const lift = el("button", { type: "button", class: "lift", "data-tool": tool }, "Lift");
      const said = el("span", { class: "small" });
      lift.addEventListener("click", async () => {
        lift.setAttribute("disabled", "");
        try {
          await deleteJson(`/v1/tasks/${t.id}/narrowings/${encodeURIComponent(tool)}`);
          await this.show(t.id);
        } catch (e) {
          said.textContent = errorText(e);
          lift.removeAttribute("disabled");
        }
      });
      narrowings.appendChild(
        el(
          "tr",
          { "data-tool": tool, "data-finding": n.finding_seq },
          el("td", {}, tool),
          el("td", { class: "num" }, n.finding_seq),
          el("td", { class: "object" }, n.summary),
          el("td", {}, `${n.profile === "task" ? "the task's own" : "the tool's"} (${n.profile_runs} runs)`),
          el("td", { class: "small" }, `${n.kept} kept, ${n.narrowed} narrowed, ${n.dropped} dropped`),
          el("td", {}, lift, said),
        ),
      );
    }
    const den = el("tbody", { id: "task-denials" });
    for (const d of [...denials].reverse()) {
      const r = d.record;
      const g = d.denial?.grant_would_allow;
      const n = d.denial?.narrowing;
      den.appendChild(
        el(
          "tr",
          { class: "dec-deny", "data-seq": r.seq },
          el("td", {}, fmtTime(r.ts_ns)),
          el("td", { class: "num" }, r.run_id ?? ""),
          el("td", {}, r.layer ?? ""),
          el("td", {}, r.op ?? ""),
          el("td", { class: "object" }, r.object ?? ""),
          el(
            "td",
            { class: "rule-cell" },
            r.rule
              ? el("div", { class: "rule-where" }, ruleWhere(r.rule))
              : d.denial?.rule && d.denial.rule !== "the default"
                ? el("div", { class: "rule-where" }, d.denial.rule)
                : el("div", { class: "muted" }, "the policy's default"),
            r.rule?.text ? el("pre", { class: "rule-text" }, r.rule.text) : null,
            !r.rule?.text && r.detail?.source === "kernel_audit" ? el("div", { class: "small muted" }, `reported by the kernel's audit log${r.detail.access ? ": " + r.detail.access : ""}`) : null,
            d.denial?.explanation ? el("div", { class: "small" }, d.denial.explanation) : null,
          ),
          el(
            "td",
            { class: "grant-cell" },
            g?.tool_rule ? el("div", { class: "rule-where" }, g.tool_rule) : null,
            n
              ? el("div", { class: "small narrowing" }, `taken away by the narrowing of ${r.tool ?? "the tool"} to its profile after finding ${n.finding_seq} (${n.summary}); lifting it would allow it`)
              : g
                ? el("div", { class: "small" }, g.message)
                : el("span", { class: "muted" }, "no grant of this task can allow it: the tool's rules deny it"),
            g ? el("pre", { class: "grant" }, JSON.stringify(g.grant, null, 1)) : null,
          ),
        ),
      );
    }
    if (!denials.length) den.appendChild(el("tr", {}, el("td", { colspan: 7, class: "muted" }, "no denials recorded for this task")));
    return el(
      "div",
      { class: "task-detail", "data-task": t.id },
      el("h3", {}, `Task ${t.id}${t.label ? " — " + t.label : ""} (${t.state})`),
      el("p", { class: "small" }, `tools ${t.tools.join(", ")}; work directory ${t.workdir}; created ${fmtDate(t.created_ns)}`),
      el("h4", {}, "Policy epochs"),
      lane,
      runsLane,
      ...(Object.keys(t.narrowed ?? {}).length
        ? [
            el("h4", {}, "Narrowed by their profiles"),
            table(["tool", "finding", "summary", "profile", "export", ""], narrowings, "narrowings"),
          ]
        : []),
      el("h4", {}, "Runs"),
      table(["run", "tool", "argv", "epoch", "started", "took", "outcome", "exit", "layers", "hardening"], runs, "runs"),
      el("h4", {}, "Denials"),
      table(["time", "run", "layer", "op", "object", "rule", "grant that would allow it"], den, "denials"),
    );
  }
}

export function taskDetailId(): number | null {
  const d = document.querySelector<HTMLElement>(".task-detail");
  return d ? Number(d.dataset.task) : null;
}

