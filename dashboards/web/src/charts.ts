// Counters and charts: decisions per second by layer and outcome (rates of
// bulwark_decisions_total, polled from /metrics every second), drops (records
// dropped, source drops, subscriber drops, gap records) and the top denied
// rules of the most recent deny records.
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { getText, latest, ruleWhere } from "./api";
import { clear, el, errorText, table } from "./dom";
import { parsePrometheus, Sample, sum } from "./metrics";

const POINTS = 120;
const COLORS: Record<string, string> = { deny: "#d33", allow: "#2a2", audit: "#d90", observe: "#888" };
const PALETTE = ["#1f77b4", "#9467bd", "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#ff7f0e", "#2ca02c"];

const DROPS: [string, string][] = [
  ["bulwark_audit_records_dropped_total", "records dropped (queue full)"],
  ["bulwark_audit_source_drops_total", "source drops (ring buffer)"],
  ["bulwark_event_subscriber_drops_total", "stream subscriber drops"],
  ["bulwark_audit_gap_records_total", "gap records written"],
];

export class ChartsView {
  readonly root: HTMLElement;
  private counters = el("div", { id: "counters", class: "counters" });
  private rateBox = el("div", { id: "chart-rates", class: "chart" });
  private dropBox = el("div", { id: "chart-drops", class: "chart" });
  private topRules = el("tbody", { id: "top-rules" });
  private err = el("p", { class: "error" });
  private prev: { t: number; s: Sample[] } | null = null;
  private xs: number[] = [];
  private series = new Map<string, number[]>(); // "layer/decision" -> rates
  private drops = new Map<string, number[]>();
  private rates: uPlot | null = null;
  private dropPlot: uPlot | null = null;
  private seriesKey = "";
  private timer = 0;
  private ticks = 0;
  visible = false;

  constructor() {
    this.root = el(
      "section",
      { id: "view-charts", class: "view" },
      el("h2", {}, "Counters and charts"),
      this.err,
      this.counters,
      el("h3", {}, "Decisions per second by layer and outcome"),
      this.rateBox,
      el("h3", {}, "Drops per second"),
      this.dropBox,
      el("h3", {}, "Top denied rules (last 1,000 denials)"),
      table(["denials", "rule", "text", "tools"], this.topRules, "top-rules"),
    );
  }

  start(): void {
    if (this.timer) return;
    void this.tick();
    this.timer = window.setInterval(() => void this.tick(), 1000);
  }

  private async tick(): Promise<void> {
    let samples: Sample[];
    try {
      samples = parsePrometheus(await getText("/metrics"));
      this.err.textContent = "";
    } catch (e) {
      this.err.textContent = `metrics: ${errorText(e)}`;
      return;
    }
    const t = Date.now() / 1000;
    this.renderCounters(samples);
    if (this.prev) {
      const dt = Math.max(0.001, t - this.prev.t);
      this.xs.push(t);
      const keys = new Set<string>(this.series.keys());
      for (const s of samples)
        if (s.name === "bulwark_decisions_total" && s.value > 0) keys.add(`${s.labels.layer}/${s.labels.decision}`);
      for (const k of keys) {
        const [layer, decision] = k.split("/");
        const now = sum(samples, "bulwark_decisions_total", { layer, decision });
        const before = sum(this.prev.s, "bulwark_decisions_total", { layer, decision });
        const arr = this.series.get(k) ?? new Array(this.xs.length - 1).fill(0);
        arr.push(Math.max(0, (now - before) / dt));
        this.series.set(k, arr);
      }
      for (const [name] of DROPS) {
        const arr = this.drops.get(name) ?? new Array(this.xs.length - 1).fill(0);
        arr.push(Math.max(0, (sum(samples, name) - sum(this.prev.s, name)) / dt));
        this.drops.set(name, arr);
      }
      if (this.xs.length > POINTS) {
        this.xs.shift();
        for (const a of this.series.values()) a.shift();
        for (const a of this.drops.values()) a.shift();
      }
      if (this.visible) this.draw();
    }
    this.prev = { t, s: samples };
    if (this.visible && this.ticks++ % 5 === 0) void this.refreshTopRules();
  }

  private renderCounters(s: Sample[]): void {
    clear(this.counters);
    const card = (label: string, v: number, cls = "") =>
      el("div", { class: `card ${cls}`, "data-metric": label }, el("div", { class: "value" }, v.toLocaleString()), el("div", { class: "label" }, label));
    for (const d of ["deny", "allow", "audit", "observe"])
      this.counters.appendChild(card(`${d} decisions`, sum(s, "bulwark_decisions_total", { decision: d }), `dec-${d}`));
    this.counters.appendChild(card("runs", sum(s, "bulwark_runs_total")));
    this.counters.appendChild(card("runs running", sum(s, "bulwark_runs_running")));
    this.counters.appendChild(card("open tasks", sum(s, "bulwark_tasks_open")));
    for (const [name, label] of DROPS) this.counters.appendChild(card(label, sum(s, name), sum(s, name) > 0 ? "out-gap" : ""));
  }

  private draw(): void {
    const keys = [...this.series.keys()].sort();
    const key = keys.join(",");
    const width = Math.max(400, this.rateBox.clientWidth || 900);
    if (!this.rates || key !== this.seriesKey) {
      this.rates?.destroy();
      clear(this.rateBox);
      this.seriesKey = key;
      let pi = 0;
      this.rates = new uPlot(
        {
          width,
          height: 260,
          scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(1, max * 1.1)] } },
          axes: [{}, { label: "per second" }],
          series: [
            {},
            ...keys.map((k) => {
              const decision = k.split("/")[1];
              const stroke = decision === "deny" || decision === "allow" ? COLORS[decision] : PALETTE[pi++ % PALETTE.length];
              return { label: k, stroke, width: decision === "deny" ? 2 : 1 };
            }),
          ],
        },
        [this.xs.slice(), ...keys.map((k) => this.series.get(k)!.slice())],
        this.rateBox,
      );
    } else {
      this.rates.setData([this.xs.slice(), ...keys.map((k) => this.series.get(k)!.slice())]);
    }
    if (!this.dropPlot) {
      this.dropPlot = new uPlot(
        {
          width,
          height: 180,
          scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(1, max * 1.1)] } },
          axes: [{}, { label: "per second" }],
          series: [{}, ...DROPS.map(([, label], i) => ({ label, stroke: PALETTE[i], width: 1 }))],
        },
        [this.xs.slice(), ...DROPS.map(([n]) => this.drops.get(n)!.slice())],
        this.dropBox,
      );
    } else {
      this.dropPlot.setData([this.xs.slice(), ...DROPS.map(([n]) => this.drops.get(n)!.slice())]);
    }
  }

  private async refreshTopRules(): Promise<void> {
    try {
      const rows = await latest({ kind: "decision", decision: "deny" }, 1000);
      const by = new Map<string, { n: number; text: string; tools: Set<string> }>();
      for (const r of rows) {
        // a denial the kernel reported without a rule: grouped by layer and what was refused
        const k = r.rule ? ruleWhere(r.rule) : `${r.layer}: ${r.detail?.access ?? r.detail?.syscall ?? r.op ?? "default"} (no rule recorded)`;
        const e = by.get(k) ?? { n: 0, text: r.rule?.text ?? "", tools: new Set<string>() };
        e.n++;
        if (r.tool) e.tools.add(r.tool);
        by.set(k, e);
      }
      clear(this.topRules);
      const top = [...by.entries()].sort((a, b) => b[1].n - a[1].n).slice(0, 10);
      for (const [k, e] of top)
        this.topRules.appendChild(
          el("tr", { class: "dec-deny" }, el("td", { class: "num" }, e.n), el("td", { class: "rule" }, k), el("td", { class: "small" }, e.text), el("td", {}, [...e.tools].join(", "))),
        );
      if (!top.length) this.topRules.appendChild(el("tr", {}, el("td", { colspan: 4, class: "muted" }, "no denials recorded")));
    } catch (e) {
      this.err.textContent = `top rules: ${errorText(e)}`;
    }
  }
}
