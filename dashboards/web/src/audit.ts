// Audit search over the store: the filters of GET /v1/audit, keyset paging
// (next page from next_after_seq; previous pages from the cursors seen).
import { AuditPage, getJson, query, ruleWhere } from "./api";
import { clear, el, errorText, fmtDate, table } from "./dom";
import { DECISIONS, KINDS, LAYERS, outcomeClass, outcomeOf, summaryOf } from "./stream";

export class AuditView {
  readonly root: HTMLElement;
  private form: HTMLFormElement;
  private body = el("tbody", { id: "audit-rows" });
  private info = el("span", { id: "audit-page", class: "muted" });
  private err = el("p", { class: "error" });
  private prevBtn = el("button", { type: "button", id: "audit-prev", disabled: true }, "◀ Previous");
  private nextBtn = el("button", { type: "button", id: "audit-next", disabled: true }, "Next ▶");
  private cursors: number[] = []; // after_seq of each page shown
  private next: number | null = null;

  constructor() {
    const input = (name: string, size = 6) => el("label", {}, `${name} `, el("input", { name, id: `a-${name}`, size }));
    const sel = (name: string, values: string[]) =>
      el("label", {}, `${name} `, el("select", { name, id: `a-${name}` }, el("option", { value: "" }, "any"), ...values.map((v) => el("option", { value: v }, v))));
    this.form = el(
      "form",
      { id: "audit-form", class: "filters" },
      input("task", 5),
      input("run", 5),
      input("tool", 10),
      input("rule", 5),
      sel("decision", DECISIONS),
      sel("layer", LAYERS),
      sel("kind", KINDS),
      el("label", {}, "per page ", el("select", { name: "limit", id: "a-limit" }, ...["25", "50", "100", "500"].map((v) => el("option", { value: v }, v)))),
      el("button", { type: "submit", id: "audit-search" }, "Search"),
    );
    this.form.addEventListener("submit", (e) => {
      e.preventDefault();
      this.cursors = [];
      void this.load(0);
    });
    this.nextBtn.addEventListener("click", () => this.next !== null && void this.load(this.next));
    this.prevBtn.addEventListener("click", () => {
      this.cursors.pop();
      const back = this.cursors.pop();
      void this.load(back ?? 0);
    });
    this.root = el(
      "section",
      { id: "view-audit", class: "view" },
      el("h2", {}, "Audit search"),
      this.form,
      el("div", { class: "pager" }, this.prevBtn, this.nextBtn, this.info),
      this.err,
      table(["seq", "time", "kind", "outcome", "task", "run", "tool", "layer", "op", "object / detail", "rule"], this.body, "audit"),
    );
  }

  private async load(after: number): Promise<void> {
    const f = new FormData(this.form);
    const params: Record<string, string> = {};
    for (const [k, v] of f.entries()) if (String(v).trim()) params[k] = String(v).trim();
    this.err.textContent = "";
    let page: AuditPage;
    try {
      page = await getJson<AuditPage>(`/v1/audit${query({ ...params, after_seq: after })}`);
    } catch (e) {
      this.err.textContent = errorText(e);
      return;
    }
    this.cursors.push(after);
    this.next = page.next_after_seq;
    clear(this.body);
    for (const r of page.rows)
      this.body.appendChild(
        el(
          "tr",
          { class: `row kind-${r.kind} ${outcomeClass(r)}`, "data-seq": r.seq },
          el("td", { class: "num" }, r.seq),
          el("td", {}, fmtDate(r.ts_ns)),
          el("td", {}, r.kind),
          el("td", { class: "outcome" }, outcomeOf(r)),
          el("td", { class: "num" }, r.task_id ?? ""),
          el("td", { class: "num" }, r.run_id ?? ""),
          el("td", {}, r.tool ?? ""),
          el("td", {}, r.layer ?? ""),
          el("td", {}, r.op ?? ""),
          el("td", { class: "object" }, summaryOf(r)),
          el("td", { class: "rule", title: r.rule?.text ?? "" }, ruleWhere(r.rule)),
        ),
      );
    if (!page.rows.length) this.body.appendChild(el("tr", {}, el("td", { colspan: 11, class: "muted" }, "no records match")));
    this.prevBtn.disabled = this.cursors.length <= 1;
    this.nextBtn.disabled = this.next === null;
    this.info.textContent = `page ${this.cursors.length}: ${page.rows.length} rows${page.rows.length ? ` (seq ${page.rows[0].seq}–${page.rows[page.rows.length - 1].seq})` : ""}; store committed up to ${page.committed_seq}`;
  }
}
