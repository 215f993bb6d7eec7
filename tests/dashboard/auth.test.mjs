// Tier dashboard_auth: who may load what from agentd's HTTP listener.
// The page's static assets are public and carry no data; every API route,
// /metrics and the live WebSocket refuse a missing or wrong token (401), take
// the token as Bearer or, on the WebSocket, as the "bulwark.token.<t>"
// subprotocol, and answer with "bulwark.v1" (never echoing the token).
import { request } from "node:http";
import { check, finish, skip, startAgentd } from "./lib.mjs";

const PORT = Number(process.env.DASHBOARD_AUTH_PORT ?? 18310);

// A raw WebSocket handshake: the status line and headers of the answer.
function handshake(port, path, headers) {
  return new Promise((resolve, reject) => {
    const req = request({
      host: "127.0.0.1", port, path,
      headers: {
        Host: `127.0.0.1:${port}`, Connection: "Upgrade", Upgrade: "websocket",
        "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", ...headers,
      },
    });
    req.on("upgrade", (res, socket) => { socket.destroy(); resolve({ status: res.statusCode, headers: res.headers }); });
    req.on("response", (res) => { res.resume(); resolve({ status: res.statusCode, headers: res.headers }); });
    req.on("error", reject);
    req.setTimeout(5000, () => req.destroy(new Error("handshake timed out")));
    req.end();
  });
}

async function main() {
  if (process.getuid && process.getuid() !== 0) skip("agentd serve runs tools in sandboxes: needs root");
  const d = await startAgentd(PORT, "auth");
  try {
    check(d.token.length === 64 && d.tokenFile() === d.token, "the printed token is the one in <state_dir>/dashboard.token");
    const { statSync } = await import("node:fs");
    const mode = statSync(`${d.dir}/state/dashboard.token`).mode & 0o777;
    check(mode === 0o600, "dashboard.token is mode 0600", mode.toString(8));

    // public page, no token
    const page = await d.call("GET", "/", undefined, null);
    check(page.status === 200, "GET / without a token: 200");
    check(page.headers.get("content-type") === "text/html; charset=utf-8", "index.html content type", page.headers.get("content-type"));
    const csp = page.headers.get("content-security-policy") ?? "";
    check(/script-src 'self'/.test(csp) && !/unsafe-inline/.test(csp) && /connect-src 'self'/.test(csp) && /default-src 'none'/.test(csp),
      "a strict Content-Security-Policy (no inline script, connect-src 'self')", csp);
    check(page.headers.get("cache-control") === "no-cache", "index.html is revalidated (no-cache)", page.headers.get("cache-control"));
    check(!/<script>|<script [^>]*>[^<]/.test(page.text.replace(/<script type="module" crossorigin src="[^"]+"><\/script>/g, "")),
      "index.html has no inline script");
    const assets = [...page.text.matchAll(/(?:src|href)="(\/assets\/[^"]+)"/g)].map((m) => m[1]);
    check(assets.some((a) => a.endsWith(".js")) && assets.some((a) => a.endsWith(".css")), "index.html names its hashed JS and CSS", assets.join(" "));
    for (const a of assets) {
      const r = await d.call("GET", a, undefined, null);
      const type = a.endsWith(".js") ? "text/javascript; charset=utf-8" : "text/css; charset=utf-8";
      check(r.status === 200 && r.headers.get("content-type") === type, `GET ${a} without a token: 200, ${type}`, `${r.status} ${r.headers.get("content-type")}`);
      check(/immutable/.test(r.headers.get("cache-control") ?? ""), `${a} is cached as immutable`);
      check(!r.text.includes(d.token), `${a} does not contain the token`);
    }
    check(!page.text.includes(d.token), "index.html does not contain the token");
    const missingAsset = await d.call("GET", "/assets/nosuch.js", undefined, null);
    check(missingAsset.status === 404, "an unknown asset is 404", missingAsset.status);

    // data needs the token
    for (const path of ["/v1/health", "/metrics", "/v1/audit", "/v1/tasks", "/v1/tools", "/v1/openapi.json", "/v1/nosuch"]) {
      const none = await d.call("GET", path, undefined, null);
      check(none.status === 401 && none.json?.error?.code === "missing_token", `GET ${path} without a token: 401 missing_token`, `${none.status} ${none.text.slice(0, 200)}`);
      const wrong = await d.call("GET", path, undefined, "0".repeat(64));
      check(wrong.status === 401 && wrong.json?.error?.code === "bad_token", `GET ${path} with a wrong token: 401 bad_token`, `${wrong.status} ${wrong.text.slice(0, 200)}`);
    }
    const ok = await d.call("GET", "/v1/health");
    check(ok.status === 200 && ok.json?.host?.layers, "GET /v1/health with the token: 200 with host.layers", ok.text.slice(0, 300));
    const layers = ok.json?.host?.layers ?? {};
    for (const name of ["namespaces", "cgroup", "seccomp", "landlock", "bpf_lsm", "sock_addr", "monitor"]) {
      const l = layers[name];
      check(l && ["enforcing", "observing", "attached", "unavailable"].includes(l.state) && typeof l.detail === "string" && l.detail.length > 0,
        `host.layers.${name} has a state and a reason`, JSON.stringify(l));
    }
    const post = await d.call("POST", "/v1/tasks", { tools: ["cat"] }, null);
    check(post.status === 401, "POST /v1/tasks without a token: 401", post.status);
    const foreign = await fetch(`${d.base}/v1/health`, { headers: { Authorization: `Bearer ${d.token}`, Origin: "http://evil.example" } });
    check(foreign.status === 403, "a foreign Origin is refused even with the token (403)", foreign.status);

    // the WebSocket
    const wsNone = await handshake(PORT, "/v1/events/ws", {});
    check(wsNone.status === 401, "WebSocket without a token: 401", wsNone.status);
    const wsWrong = await handshake(PORT, "/v1/events/ws", { "Sec-WebSocket-Protocol": `bulwark.v1, bulwark.token.${"1".repeat(64)}` });
    check(wsWrong.status === 401, "WebSocket with a wrong token subprotocol: 401", wsWrong.status);
    const wsOk = await handshake(PORT, "/v1/events/ws", { "Sec-WebSocket-Protocol": `bulwark.v1, bulwark.token.${d.token}` });
    check(wsOk.status === 101, "WebSocket with the token subprotocol: 101", wsOk.status);
    check(wsOk.headers["sec-websocket-protocol"] === "bulwark.v1", "the server answers with bulwark.v1, not the token", wsOk.headers["sec-websocket-protocol"]);
    const wsBearer = await handshake(PORT, "/v1/events/ws", { Authorization: `Bearer ${d.token}` });
    check(wsBearer.status === 101, "WebSocket with a Bearer header: 101", wsBearer.status);
    const wsOrigin = await handshake(PORT, "/v1/events/ws", { Origin: "http://evil.example", "Sec-WebSocket-Protocol": `bulwark.v1, bulwark.token.${d.token}` });
    check(wsOrigin.status === 403, "WebSocket from a foreign Origin: 403", wsOrigin.status);
  } finally {
    await d.stop();
  }

  // Without --http the listener comes from dashboard.listen (the default is
  // 127.0.0.1:7878; a config moves it here to stay inside the test's ports).
  const c = await startAgentd(PORT + 1, "auth-config", { config: `dashboard:\n  listen: 127.0.0.1:${PORT + 1}\n` });
  try {
    check(c.url.startsWith(`http://127.0.0.1:${PORT + 1}/#token=`), "without --http the dashboard listens on dashboard.listen", c.url);
    check((await c.call("GET", "/")).status === 200 && (await c.call("GET", "/v1/health")).status === 200, "page and API answer there");
  } finally {
    await c.stop();
  }
  // A default listener whose port is taken is skipped with a warning; the
  // daemon still serves its unix socket.
  const { createServer } = await import("node:net");
  const blocker = createServer();
  await new Promise((r) => blocker.listen(PORT + 2, "127.0.0.1", r));
  const t = await startAgentd(PORT + 2, "auth-taken", { config: `dashboard:\n  listen: 127.0.0.1:${PORT + 2}\n`, expectDashboard: false });
  try {
    const h = await t.unixGet("/v1/health").catch((e) => ({ status: 0, body: String(e) }));
    check(h.status === 200, "with the dashboard port taken agentd still serves its unix socket", `${h.status} ${t.log()}`);
    for (let i = 0; i < 40 && !/serving without it/.test(t.out() + t.log()); i++) await new Promise((r) => setTimeout(r, 50));
    check(/dashboard listener 127\.0\.0\.1:\d+: .*serving without it/.test(t.out() + t.log()) && !/dashboard: http/.test(t.out()),
      "it warns that the dashboard listener is skipped and prints no address", `log: ${t.log()}\nout: ${t.out()}`);
  } finally {
    await t.stop();
    blocker.close();
  }
  process.exitCode = finish();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
