// DOM helpers. Every value from the API goes in as text (textContent), never
// as markup: audit objects are paths and names a sandboxed tool chose.

type Attrs = Record<string, string | number | boolean | undefined>;
type Child = Node | string | number | null | undefined | false;

export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false) continue;
    if (k === "class") e.className = String(v);
    else if (k.startsWith("data-")) e.setAttribute(k, String(v));
    else if (v === true) e.setAttribute(k, "");
    else e.setAttribute(k, String(v));
  }
  append(e, ...children);
  return e;
}

export function append(parent: Node, ...children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    parent.appendChild(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
  }
}

export function clear(e: Element): void {
  while (e.firstChild) e.removeChild(e.firstChild);
}

export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const e = document.getElementById(id);
  if (!e) throw new Error(`missing element #${id}`);
  return e as T;
}

export function fmtTime(ns: number | null | undefined): string {
  if (!ns) return "";
  const d = new Date(ns / 1e6);
  const p = (n: number, w = 2) => String(n).padStart(w, "0");
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
}

export function fmtDate(ns: number | null | undefined): string {
  if (!ns) return "";
  return new Date(ns / 1e6).toISOString().replace("T", " ").replace("Z", "");
}

export function fmtDuration(ns: number): string {
  if (ns < 1e6) return `${(ns / 1e3).toFixed(0)} µs`;
  if (ns < 1e9) return `${(ns / 1e6).toFixed(1)} ms`;
  return `${(ns / 1e9).toFixed(2)} s`;
}

export function table(headers: string[], body: HTMLTableSectionElement, cls = ""): HTMLTableElement {
  return el("table", { class: `grid ${cls}` }, el("thead", {}, el("tr", {}, ...headers.map((h) => el("th", {}, h)))), body);
}

export function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
