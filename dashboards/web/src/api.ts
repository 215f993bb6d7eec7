// The agentd API as the page uses it. The token comes from the URL fragment
// (#token=..., never sent to a server) or a paste, is kept in sessionStorage
// for reloads, and goes out as "Authorization: Bearer" (REST) and as the
// WebSocket subprotocol "bulwark.token.<token>" next to "bulwark.v1".

const KEY = "bulwark.token";
let token = "";

export class ApiError extends Error {
  constructor(
    public status: number,
    public code: string,
    message: string,
  ) {
    super(`${status} ${code}: ${message}`);
  }
}

export function takeTokenFromLocation(): void {
  const m = /(?:^#|&)token=([0-9A-Za-z._~-]+)/.exec(location.hash);
  if (m) {
    token = m[1];
    sessionStorage.setItem(KEY, token);
    // keep the token out of the address bar, history and screenshots
    history.replaceState(null, "", location.pathname + location.search);
  } else {
    token = sessionStorage.getItem(KEY) ?? "";
  }
}

export function setToken(t: string): void {
  token = t.trim();
  sessionStorage.setItem(KEY, token);
}

export function hasToken(): boolean {
  return token !== "";
}

async function call(method: string, path: string, body?: unknown): Promise<Response> {
  const headers: Record<string, string> = { Authorization: `Bearer ${token}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: "no-store",
    credentials: "omit",
    redirect: "error",
  });
  if (!r.ok) {
    let code = "http_error";
    let msg = r.statusText;
    try {
      const j = await r.json();
      code = j?.error?.code ?? code;
      msg = j?.error?.message ?? msg;
    } catch {
      /* not JSON */
    }
    throw new ApiError(r.status, code, msg);
  }
  return r;
}

export async function getJson<T = any>(path: string): Promise<T> {
  return (await call("GET", path)).json() as Promise<T>;
}

// POST with a JSON body, or none (body undefined: the profile actions).
export async function postJson<T = any>(path: string, body?: unknown): Promise<T> {
  return (await call("POST", path, body)).json() as Promise<T>;
}

// DELETE (lifting a task's narrowing): the answer's JSON.
export async function deleteJson<T = any>(path: string): Promise<T> {
  return (await call("DELETE", path)).json() as Promise<T>;
}

export async function getText(path: string): Promise<string> {
  return (await call("GET", path)).text();
}

export function query(params: Record<string, string | number | undefined | null>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : "";
}

export function openEvents(filters: Record<string, string>): WebSocket {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return new WebSocket(`${scheme}//${location.host}/v1/events/ws${query(filters)}`, [
    "bulwark.v1",
    `bulwark.token.${token}`,
  ]);
}

// One message of the live stream as a record; null when it is not JSON.
export function rowOf(m: MessageEvent): AuditRow | null {
  try {
    return JSON.parse(String(m.data)) as AuditRow;
  } catch {
    return null;
  }
}

// An audit record as GET /v1/audit and the live stream carry it.
export interface AuditRow {
  seq: number;
  kind: string;
  ts_ns: number;
  task_id?: number;
  run_id?: number;
  tool?: string;
  policy_version?: number;
  rule?: { id: number; file?: string; line?: number; text?: string } | null;
  decision?: string;
  errno?: number;
  object?: string;
  layer?: string;
  op?: string;
  pid?: number;
  comm?: string;
  detail?: any;
}

export interface AuditPage {
  rows: AuditRow[];
  next_after_seq: number | null;
  committed_seq: number;
}

// The newest `n` rows matching `filters` (the store pages oldest first).
// A rare kind (findings among many decisions) may have fewer than `n` rows
// in the widest window looked at: those are returned, not none.
export async function latest(filters: Record<string, string | number | undefined>, n: number): Promise<AuditRow[]> {
  const head = await getJson<AuditPage>(`/v1/audit${query({ limit: 1 })}`);
  const top = head.committed_seq;
  let window = Math.max(n * 4, 200);
  let rows: AuditRow[] = [];
  for (let attempt = 0; attempt < 4; attempt++) {
    const after = Math.max(0, top - window);
    rows = [];
    let cursor: number | null = after;
    while (cursor !== null) {
      const page: AuditPage = await getJson<AuditPage>(`/v1/audit${query({ ...filters, after_seq: cursor, limit: 1000 })}`);
      rows.push(...page.rows);
      cursor = page.next_after_seq;
      if (rows.length > 5000) break;
    }
    if (rows.length >= n || after === 0) return rows.slice(-n);
    window *= 8;
  }
  return rows.slice(-n);
}

export function ruleWhere(r: AuditRow["rule"]): string {
  if (!r) return "";
  return r.file ? `${r.file}:${r.line}` : `rule #${r.id}`;
}
