// The host's enforcement status (/v1/health host.layers: enforcing,
// observing, attached or unavailable with the reason), its kernel facts, and
// the hardening each recent run had (from run_exit records).
import { getJson, latest } from "./api";
import { clear, el, errorText, fmtTime, table } from "./dom";

export class HostView {
  readonly root: HTMLElement;
  private body = el("div", { id: "host-body" });

  constructor() {
    const refresh = el("button", { type: "button", id: "host-refresh" }, "Refresh");
    refresh.addEventListener("click", () => void this.refresh());
    this.root = el("section", { id: "view-host", class: "view" }, el("h2", {}, "Host enforcement ", refresh), this.body);
  }

  async refresh(): Promise<void> {
    clear(this.body);
    let health: any;
    try {
      const r = await fetchHealth();
      health = r;
    } catch (e) {
      this.body.appendChild(el("p", { class: "error" }, errorText(e)));
      return;
    }
    const host = health.host ?? {};
    const layers = el("tbody", { id: "host-layers" });
    for (const [name, l] of Object.entries<any>(host.layers ?? {}))
      layers.appendChild(
        el(
          "tr",
          { class: `state-${l.state}`, "data-layer": name },
          el("td", {}, name),
          el("td", { class: "state" }, l.state),
          el("td", { class: "small" }, l.detail ?? ""),
          el("td", { class: "small" }, Array.isArray(l.programs) ? l.programs.join("\n") : ""),
        ),
      );
    const audit = health.audit ?? {};
    this.body.appendChild(
      el(
        "div",
        {},
        el("p", {}, `agentd ${health.version}: ${health.status}${health.accepting_runs ? ", accepting runs" : ", REFUSING new runs"}; audit store ${audit.state ?? "?"}${audit.reason ? " (" + audit.reason + ")" : ""}`),
        el("p", { class: "small" }, `kernel ${host.kernel ?? "?"}; LSMs ${host.lsm || "unknown"}; BTF ${host.btf ? "yes" : "no"}; bpffs ${host.bpffs ? "yes" : "no"}`),
        table(["layer", "state", "in force / why not", "programs"], layers, "layers"),
        host.kernel_audit
          ? el("p", { class: "small", id: "host-kaudit" }, `kernel audit log (Landlock and seccomp denials): ${kauditLine(host.kernel_audit)}`)
          : null,
        el("h3", {}, "Tools: their rules and the layers in force here"),
        table(["tool", "rules held", "unenforced (unenforceable: run)", "launch"], toolRows(host.tools), "tools"),
        el("h3", {}, "Hardening"),
        el("p", { class: "small" }, host.hardening?.detail ?? ""),
        ownHardening(host.hardening?.self),
        ownPrivilege(host.hardening?.privilege),
      ),
    );
    const runs = el("tbody", { id: "host-runs" });
    try {
      const exits = await latest({ kind: "run_exit" }, 20);
      for (const x of exits.reverse()) {
        const d = x.detail ?? {};
        runs.appendChild(
          el(
            "tr",
            {},
            el("td", {}, fmtTime(x.ts_ns)),
            el("td", { class: "num" }, x.task_id ?? ""),
            el("td", { class: "num" }, x.run_id ?? ""),
            el("td", {}, x.tool ?? ""),
            el("td", { class: "small" }, layersText(d)),
            el("td", { class: "small" }, (Array.isArray(d.hardening) ? d.hardening : []).join("; ")),
          ),
        );
      }
    } catch (e) {
      runs.appendChild(el("tr", {}, el("td", { colspan: 6, class: "error" }, errorText(e))));
    }
    this.body.appendChild(el("div", {}, el("h3", {}, "Recent runs: layers and hardening in force"), table(["ended", "task", "run", "tool", "layers", "hardening"], runs, "runs")));
  }
}

// A run's layers, then its rules' summary and any rule it ran without a
// layer holding it (run_exit detail).
export function layersText(d: any): string {
  let s = (Array.isArray(d?.layers) ? d.layers : []).map((l: any) => `${l.name}: ${l.state}`).join("; ");
  if (d?.rules) s += `; rules: ${d.rules}`;
  for (const u of Array.isArray(d?.rules_unenforced) ? d.rules_unenforced : []) s += `; UNENFORCED: ${u}`;
  return s;
}

// /v1/health host.tools: per tool, what a launch here would hold.
function toolRows(tools: any): HTMLTableSectionElement {
  const body = el("tbody", { id: "host-tools" });
  for (const [name, t] of Object.entries<any>(tools ?? {}))
    body.appendChild(
      el(
        "tr",
        { class: t.refused ? "state-unavailable" : "state-enforcing", "data-tool": name },
        el("td", {}, name),
        el("td", { class: "small" }, t.summary ?? ""),
        el("td", { class: "small" }, (Array.isArray(t.unenforced) ? t.unenforced : []).join("\n")),
        el("td", { class: "small" }, t.refused ? `refused: ${t.error ?? ""}` : "starts"),
      ),
    );
  return body;
}

// /v1/health answers 503 with the same document when the store refuses.
async function fetchHealth(): Promise<any> {
  try {
    return await getJson("/v1/health");
  } catch (e: any) {
    if (e?.status === 503) return { status: "refusing", accepting_runs: false };
    throw e;
  }
}

function kauditLine(k: any): string {
  if (typeof k !== "object" || k === null) return String(k);
  return Object.entries(k)
    .map(([key, v]) => `${key} ${typeof v === "object" ? JSON.stringify(v) : String(v)}`)
    .join("; ");
}

// agentd's own binary under the checker it applies to tools: what the
// enforcement plane asks of others, shown of itself.
function ownHardening(self: any): HTMLElement {
  if (!self || self.error) return el("p", { class: "small", id: "host-self" }, `agentd's own hardening: ${self?.error ?? "not reported"}`);
  const props = el("tbody", { id: "host-self" });
  for (const [name, on] of Object.entries(self.properties ?? {}))
    props.appendChild(el("tr", { class: on ? "state-enforcing" : "state-unavailable", "data-prop": name }, el("td", {}, name), el("td", { class: "state" }, on ? "yes" : "no")));
  const lacks: string[] = Array.isArray(self.toolchain_lacks) ? self.toolchain_lacks : [];
  return el(
    "div",
    {},
    el("h4", {}, `agentd itself (${self.binary ?? "?"})`),
    table(["property", "present"], props, "self"),
    lacks.length ? el("p", { class: "small" }, `the build's toolchain cannot give: ${lacks.join("; ")}`) : null,
  );
}

// agentd's own privilege: the capabilities it keeps (each with why), whether
// it holds each now, and its own seccomp filter.
function ownPrivilege(p: any): HTMLElement {
  if (!p || !Array.isArray(p.kept)) return el("p", { class: "small", id: "host-privilege" }, "agentd's own privilege: not reported");
  const held = new Set<string>(Array.isArray(p.now?.effective) ? p.now.effective : []);
  const rows = el("tbody", { id: "host-privilege" });
  for (const k of p.kept)
    rows.appendChild(
      el("tr", { class: held.has(k.name) ? "state-enforcing" : "state-unavailable", "data-cap": k.name }, el("td", {}, k.name), el("td", { class: "state" }, held.has(k.name) ? "held" : "not held"), el("td", { class: "small" }, k.why)),
    );
  const f = p.seccomp_filter;
  const dropped: string[] = Array.isArray(p.dropped) ? p.dropped : [];
  return el(
    "div",
    {},
    el("h4", {}, "agentd's own privilege"),
    table(["capability kept", "now", "why"], rows, "privilege"),
    el("p", { class: "small", id: "host-privilege-seccomp" }, f ? `own seccomp filter: ${f.bundle} (${f.hash}, ${f.instructions} instructions)` : "own seccomp filter: none (agentd serve --self-seccomp)"),
    dropped.length ? el("p", { class: "small" }, `dropped at start: ${dropped.join(" ")}`) : null,
  );
}
