// Replay of a candidate rule file: POST /v1/replay judges the recorded
// operations of a tool again under the candidate and lists what it would have
// decided differently. The candidate's text differences to the rule file in
// force are shown next to it (a line diff). "Propose" (POST /v1/propose)
// writes the narrowest rules that would allow what the tool's runs were
// refused, checked under them, and can be taken as the candidate.
import { getJson, postJson } from "./api";
import { clear, el, errorText, fmtDate, table } from "./dom";

// Line diff by longest common subsequence (rule files are small).
export function lineDiff(a: string[], b: string[]): { op: " " | "-" | "+"; line: string }[] {
  const n = a.length, m = b.length;
  if (n * m > 4_000_000) return [...a.map((line) => ({ op: "-" as const, line })), ...b.map((line) => ({ op: "+" as const, line }))];
  const L: Uint32Array[] = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--) L[i][j] = a[i] === b[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
  const out: { op: " " | "-" | "+"; line: string }[] = [];
  let i = 0, j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) { out.push({ op: " ", line: a[i] }); i++; j++; }
    else if (L[i + 1][j] >= L[i][j + 1]) out.push({ op: "-", line: a[i++] });
    else out.push({ op: "+", line: b[j++] });
  }
  while (i < n) out.push({ op: "-", line: a[i++] });
  while (j < m) out.push({ op: "+", line: b[j++] });
  return out;
}

export class ReplayView {
  readonly root: HTMLElement;
  private tool = el("select", { id: "r-tool", name: "tool" });
  private text = el("textarea", { id: "r-rules", name: "rules", rows: 18, cols: 90, spellcheck: "false" });
  private task = el("input", { id: "r-task", name: "task", size: 5, inputmode: "numeric" });
  private current = "";
  private out = el("div", { id: "replay-result" });
  private loaded = false;

  constructor() {
    const run = el("button", { type: "button", id: "replay-run" }, "Replay");
    const propose = el("button", { type: "button", id: "propose-run" }, "Propose rules for what was refused");
    const reset = el("button", { type: "button", id: "replay-reset" }, "Reset to the rules in force");
    run.addEventListener("click", () => void this.replay());
    propose.addEventListener("click", () => void this.propose());
    reset.addEventListener("click", () => (this.text.value = this.current));
    this.tool.addEventListener("change", () => void this.loadTool());
    this.root = el(
      "section",
      { id: "view-replay", class: "view" },
      el("h2", {}, "Replay a candidate rule file"),
      el("div", { class: "filters" }, el("label", {}, "tool ", this.tool), el("label", {}, "only task ", this.task), run, propose, reset),
      this.text,
      this.out,
    );
  }

  async refresh(): Promise<void> {
    if (this.loaded) return;
    try {
      const j = await getJson<{ tools: { name: string }[] }>("/v1/tools");
      clear(this.tool);
      for (const t of j.tools) this.tool.appendChild(el("option", { value: t.name }, t.name));
      this.loaded = true;
      await this.loadTool();
    } catch (e) {
      this.out.textContent = errorText(e);
    }
  }

  private async loadTool(): Promise<void> {
    const t = await getJson<{ rules_text?: string }>(`/v1/tools/${encodeURIComponent(this.tool.value)}`);
    this.current = t.rules_text ?? "";
    this.text.value = this.current;
  }

  // Posts {tool, task?, ...extra} to path; on an error shows it (element id
  // errorId) and returns null.
  private async post(path: string, extra: Record<string, unknown>, errorId: string): Promise<any | null> {
    clear(this.out);
    const body: Record<string, unknown> = { tool: this.tool.value, ...extra };
    if (this.task.value.trim()) body.task = Number(this.task.value.trim());
    try {
      return await postJson(path, body);
    } catch (e) {
      this.out.appendChild(el("pre", { class: "error", id: errorId }, errorText(e)));
      return null;
    }
  }

  private async propose(): Promise<void> {
    const r = await this.post("/v1/propose", {}, "propose-error");
    if (!r) return;
    const rows = el("tbody", { id: "propose-still" });
    for (const s of r.still_refused ?? [])
      rows.appendChild(el("tr", { "data-seq": s.seq }, el("td", { class: "num" }, s.seq), el("td", {}, s.op), el("td", { class: "object" }, s.object), el("td", { class: "small" }, s.explanation ?? "")));
    if (!rows.firstChild) rows.appendChild(el("tr", {}, el("td", { colspan: 4, class: "muted" }, "the proposal allows every one of them")));
    const use = el("button", { type: "button", id: "propose-use" }, "Use as the candidate");
    use.addEventListener("click", () => (this.text.value = r.rules));
    const reasons = Object.entries<number>(r.skip_reasons ?? {}).map(([k, v]) => `${v} × ${k}`).join("; ");
    this.out.appendChild(
      el(
        "div",
        {},
        el("p", { id: "propose-summary" }, `${r.refused} refused records, ${r.operations} a rule can name${reasons ? " (" + reasons + ")" : ""}: the proposal allows ${r.allowed_by_proposal ?? 0}.`),
        el("pre", { class: "diff", id: "propose-rules" }, r.rules),
        use,
        ...(r.warnings ?? []).map((w: string) => el("p", { class: "small warning" }, w)),
        el("h3", {}, "Still refused under the proposal"),
        table(["seq", "op", "object", "why"], rows, "propose"),
      ),
    );
  }

  private async replay(): Promise<void> {
    const r = await this.post("/v1/replay", { rules: this.text.value }, "replay-error");
    if (!r) return;
    const diff = el("pre", { class: "diff", id: "replay-diff" });
    for (const d of lineDiff(this.current.split("\n"), this.text.value.split("\n")))
      if (d.op !== " ") diff.appendChild(el("div", { class: d.op === "+" ? "add" : "del" }, `${d.op} ${d.line}`));
    if (!diff.firstChild) diff.appendChild(el("div", { class: "muted" }, "(the candidate is the rule file in force)"));
    const rows = el("tbody", { id: "replay-changes" });
    for (const c of r.changed)
      rows.appendChild(
        el(
          "tr",
          { class: `change ${c.candidate === "deny" ? "dec-deny" : "dec-allow"}`, "data-seq": c.seq },
          el("td", { class: "num" }, c.seq),
          el("td", {}, fmtDate(c.ts_ns)),
          el("td", { class: "num" }, c.task_id),
          el("td", { class: "num" }, c.run_id),
          el("td", {}, c.op),
          el("td", { class: "object" }, c.object),
          el("td", {}, `${c.before} → ${c.candidate}`),
          el("td", { class: "rule" }, c.candidate_rule ?? "(default)"),
          el("td", { class: "small" }, c.explanation ?? ""),
        ),
      );
    if (!r.changed.length) rows.appendChild(el("tr", {}, el("td", { colspan: 9, class: "muted" }, "no recorded operation would be decided differently")));
    const reasons = Object.entries<number>(r.skip_reasons ?? {}).map(([k, v]) => `${v} × ${k}`).join("; ");
    this.out.appendChild(
      el(
        "div",
        {},
        el("p", { id: "replay-summary" }, `${r.evaluated} operations judged again: ${r.changed.length} decided differently${r.changed_truncated ? " (first 1,000 shown)" : ""}, ${r.unchanged} unchanged, ${r.skipped} skipped${reasons ? " (" + reasons + ")" : ""}. Candidate ${r.candidate_hash}.`),
        el("h3", {}, "Rule file differences"),
        diff,
        el("h3", {}, "Decisions that would change"),
        table(["seq", "time", "task", "run", "op", "object", "recorded → candidate", "candidate rule", "explanation"], rows, "replay"),
      ),
    );
  }
}
