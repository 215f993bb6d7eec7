// Tier dashboard_grafana: dashboards/grafana/agentd.json is a Grafana
// dashboard (the fields Grafana's import needs, unique panel ids, panels
// inside the 24-column grid, a Prometheus datasource input) and every metric
// its PromQL expressions name is served by a real agentd's /metrics.
import { readFileSync } from "node:fs";
import { check, finish, skip, startAgentd } from "./lib.mjs";

const FILE = process.env.GRAFANA_DASHBOARD;
const PORT = Number(process.env.DASHBOARD_GRAFANA_PORT ?? 18330);
const PROMQL_WORDS = new Set(["sum", "by", "without", "rate", "irate", "increase", "histogram_quantile", "max", "min", "avg",
  "count", "le", "job", "layer", "decision", "class", "outcome", "label_values", "on", "ignoring", "group_left", "group_right",
  "and", "or", "unless", "offset", "topk", "bottomk", "abs", "clamp_min", "delta", "deriv", "time", "vector", "scalar"]);

// Metric names of an expression: identifiers that are neither PromQL words,
// label names (before = or inside by (...)), template variables nor strings.
export function metricNames(expr) {
  const noStrings = expr.replace(/"(?:[^"\\]|\\.)*"/g, '""').replace(/\$\{?\w+\}?/g, " ").replace(/\[[^\]]*\]/g, " ");
  const noLabels = noStrings.replace(/\{[^}]*\}/g, " ").replace(/\b(by|without|on|ignoring)\s*\([^)]*\)/g, " ");
  const names = new Set();
  for (const m of noLabels.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    if (PROMQL_WORDS.has(m[0]) || /^\d/.test(m[0])) continue;
    names.add(m[0]);
  }
  return [...names];
}

async function main() {
  if (!FILE) throw new Error("GRAFANA_DASHBOARD not set");
  let doc;
  try {
    doc = JSON.parse(readFileSync(FILE, "utf8"));
  } catch (e) {
    check(false, `${FILE} is JSON`, e.message);
    process.exitCode = finish();
    return;
  }
  check(typeof doc.title === "string" && doc.title.length > 0, "the dashboard has a title");
  check(typeof doc.uid === "string" && /^[a-zA-Z0-9_-]{1,40}$/.test(doc.uid), "the dashboard has a valid uid", doc.uid);
  check(Number.isInteger(doc.schemaVersion) && doc.schemaVersion >= 30, "schemaVersion is a current one", doc.schemaVersion);
  check(Array.isArray(doc.panels) && doc.panels.length > 0, "the dashboard has panels");
  const input = (doc.__inputs ?? []).find((i) => i.type === "datasource" && i.pluginId === "prometheus");
  check(!!input, "a Prometheus datasource input for import", JSON.stringify(doc.__inputs));
  const ids = new Set();
  const exprs = [];
  const panelTypes = new Set(["row", "timeseries", "stat", "gauge", "table", "bargauge", "text", "heatmap"]);
  for (const p of doc.panels) {
    check(Number.isInteger(p.id) && !ids.has(p.id), `panel "${p.title}" has a unique id`, p.id);
    ids.add(p.id);
    check(panelTypes.has(p.type), `panel "${p.title}" has a known type`, p.type);
    const g = p.gridPos ?? {};
    check([g.x, g.y, g.w, g.h].every(Number.isInteger) && g.x >= 0 && g.w > 0 && g.x + g.w <= 24 && g.h > 0,
      `panel "${p.title}" lies inside the 24-column grid`, JSON.stringify(g));
    if (p.type === "row") continue;
    check(Array.isArray(p.targets) && p.targets.length > 0, `panel "${p.title}" has queries`);
    for (const t of p.targets ?? []) {
      check(typeof t.expr === "string" && t.expr.length > 0 && typeof t.refId === "string", `panel "${p.title}" ${t.refId}: an expression`);
      check(t.datasource?.uid === "${" + input?.name + "}", `panel "${p.title}" ${t.refId}: uses the datasource input`, JSON.stringify(t.datasource));
      exprs.push({ panel: p.title, expr: t.expr });
      // brackets balance
      let depth = 0, ok = true;
      for (const c of t.expr.replace(/"(?:[^"\\]|\\.)*"/g, "")) {
        if ("({[".includes(c)) depth++;
        if (")}]".includes(c)) depth--;
        if (depth < 0) ok = false;
      }
      check(ok && depth === 0, `panel "${p.title}" ${t.refId}: brackets balance`, t.expr);
    }
  }
  for (const v of doc.templating?.list ?? []) if (v.query?.query) exprs.push({ panel: `variable ${v.name}`, expr: v.query.query.replace(/label_values\(([^,]+),.*\)/, "$1") });

  if (process.getuid && process.getuid() !== 0) skip("the metric check runs a real agentd serve: needs root");
  const d = await startAgentd(PORT, "grafana");
  let served;
  try {
    const r = await d.call("GET", "/metrics");
    check(r.status === 200, "agentd serves /metrics", r.status);
    served = new Set();
    for (const line of r.text.split("\n")) {
      const m = /^# TYPE (\S+) (\S+)/.exec(line);
      if (!m) continue;
      served.add(m[1]);
      if (m[2] === "histogram") for (const s of ["_bucket", "_sum", "_count"]) served.add(m[1] + s);
    }
  } finally {
    await d.stop();
  }
  check(served.size > 10, "the /metrics output names its metrics", [...served].join(" "));
  const used = new Set();
  for (const { panel, expr } of exprs) {
    const names = metricNames(expr);
    check(names.length > 0, `"${panel}": the expression names a metric`, expr);
    for (const n of names) {
      used.add(n);
      check(served.has(n), `"${panel}": ${n} is served by agentd`, expr);
    }
  }
  console.log(`  figure: ${used.size} metric names used, ${served.size} served`);
  process.exitCode = finish();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
