// Bulwark's live audit page. Seven views over the agentd API: the live
// stream, tasks, counters and charts, host enforcement, audit search, replay,
// and the unusual runs (findings against the tools' behaviour profiles).
import "./style.css";
import { ApiError, getJson, hasToken, setToken, takeTokenFromLocation } from "./api";
import { AuditView } from "./audit";
import { ChartsView } from "./charts";
import { byId, el, errorText } from "./dom";
import { HostView } from "./host";
import { ReplayView } from "./replay";
import { StreamView } from "./stream";
import { TasksView } from "./tasks";
import { UnusualView } from "./unusual";

type ViewName = "stream" | "tasks" | "charts" | "host" | "audit" | "replay" | "unusual";

function boot(): void {
  takeTokenFromLocation();
  if (!hasToken()) return askToken("");
  void getJson("/v1/health")
    .then(() => start())
    .catch((e) => {
      if (e instanceof ApiError && e.status === 401) askToken("the token was not accepted");
      else if (e instanceof ApiError && e.status === 503) start();
      else askToken(errorText(e));
    });
}

function askToken(why: string): void {
  const login = byId("login");
  login.hidden = false;
  byId("login-error").textContent = why;
  byId<HTMLFormElement>("login-form").onsubmit = (ev) => {
    ev.preventDefault();
    setToken(byId<HTMLInputElement>("login-token").value);
    login.hidden = true;
    boot();
  };
}

function start(): void {
  const main = byId("main");
  const nav = byId("nav");
  const conn = byId("conn");
  const stream = new StreamView();
  const tasks = new TasksView();
  const charts = new ChartsView();
  const host = new HostView();
  const audit = new AuditView();
  const replay = new ReplayView();
  const unusual = new UnusualView();
  const views: Record<ViewName, { root: HTMLElement; label: string; show?: () => void }> = {
    stream: { root: stream.root, label: "Live" },
    tasks: { root: tasks.root, label: "Tasks", show: () => void tasks.refresh() },
    charts: { root: charts.root, label: "Charts" },
    host: { root: host.root, label: "Host", show: () => void host.refresh() },
    audit: { root: audit.root, label: "Audit search" },
    replay: { root: replay.root, label: "Replay", show: () => void replay.refresh() },
    unusual: { root: unusual.root, label: "Unusual" },
  };
  const buttons = new Map<ViewName, HTMLButtonElement>();
  const show = (name: ViewName) => {
    for (const [n, v] of Object.entries(views) as [ViewName, (typeof views)[ViewName]][]) {
      v.root.hidden = n !== name;
      buttons.get(n)!.classList.toggle("active", n === name);
      buttons.get(n)!.setAttribute("aria-pressed", String(n === name));
    }
    charts.visible = name === "charts";
    unusual.setVisible(name === "unusual");
    views[name].show?.();
  };
  for (const [n, v] of Object.entries(views) as [ViewName, (typeof views)[ViewName]][]) {
    const b = el("button", { type: "button", id: `nav-${n}`, "data-view": n }, v.label);
    b.addEventListener("click", () => show(n));
    buttons.set(n, b);
    nav.appendChild(b);
    main.appendChild(v.root);
  }
  stream.onState = (s) => {
    conn.textContent = s === "live" ? "live" : s === "down" ? "reconnecting" : "connecting";
    conn.dataset.state = s;
    conn.className = `conn ${s === "live" ? "conn-up" : "conn-down"}`;
  };
  // findings that arrived while the Unusual view was not shown: a count on its button
  const unusualBadge = el("span", { class: "badge", id: "nav-unusual-count", hidden: true });
  buttons.get("unusual")!.appendChild(unusualBadge);
  unusual.onUnseen = (n) => {
    unusualBadge.textContent = String(n);
    unusualBadge.hidden = n === 0;
  };
  stream.onTask = (id) => {
    show("tasks");
    void tasks.show(id);
  };
  show("stream");
  void stream.start();
  charts.start();
  unusual.start();
  document.body.dataset.ready = "1";
}

boot();
