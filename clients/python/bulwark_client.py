"""A small client for Bulwark's agentd HTTP API (v1), standard library only.

Over the daemon's unix socket (callers are identified by their uid):

    from bulwark_client import Client
    api = Client.unix("/run/bulwark/agentd.sock")

or over its loopback TCP listener with a bearer token:

    api = Client.tcp("http://127.0.0.1:7878", token="...")

Then:

    task = api.create_task(["cat", "sh"], grant={"files": [...]})
    result = task.exec("cat", ["cat", "notes.txt"], files={"notes.txt": "hi\\n"})
    task.update_grant({...}, expires_in_ms=5000)   # time-boxed
    for row in api.audit(task=task.id): ...
    task.close()

Every error the API answers ({"error": {"code", "message", ...}}) is raised as
an ApiError subclass chosen by status and code, carrying the status, the code,
the message and the whole error body. A daemon that cannot be reached raises
TransportError: DaemonUnavailable when nothing accepted the connection (the
request was not sent; Client(retry_unavailable=30) retries for up to 30 s,
e.g. across a daemon restart), ConnectionLost when the connection ended
after the request was sent (a daemon that died: every call ends at once).
"""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.parse
from typing import Any, Dict, Iterator, List, Optional, Tuple

__all__ = [
    "Client",
    "Task",
    "BulwarkError",
    "TransportError",
    "DaemonUnavailable",
    "ConnectionLost",
    "ApiError",
    "BadRequest",
    "Unauthorized",
    "Forbidden",
    "GrantWidens",
    "NotFound",
    "Conflict",
    "Unprocessable",
    "RuleUnenforced",
    "TooManyRequests",
    "ServiceUnavailable",
]


class BulwarkError(Exception):
    """Any failure of this client."""


class TransportError(BulwarkError):
    """The daemon could not be reached, or the connection broke."""


class DaemonUnavailable(TransportError):
    """No daemon accepted the connection (down, or restarting): the request was
    not sent, so it is safe to send again. Client(retry_unavailable=seconds)
    does that by itself."""


class ConnectionLost(TransportError):
    """The connection ended after the request was sent, before the whole reply
    (the daemon died or was restarted): it may have acted on the request. An
    exec may have run: find it by its client_ref in the audit before sending
    it again."""


class ApiError(BulwarkError):
    """An error answered by the API: status, code, message and the error body."""

    def __init__(self, status: int, code: str, message: str, error: Dict[str, Any], method: str, path: str):
        super().__init__(f"{method} {path}: HTTP {status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.error = error  # the whole {"code", "message", ...} object
        self.method = method
        self.path = path


class BadRequest(ApiError):
    """400: the request is malformed (the message names the field)."""


class Unauthorized(ApiError):
    """401: a bearer token is missing or wrong (TCP)."""


class Forbidden(ApiError):
    """403: the caller, Host or Origin is refused, or a grant would widen the rules."""


class GrantWidens(Forbidden):
    """403 grant_widens: the grant would widen a tool's rules; `reasons` names each rule in the way."""

    @property
    def reasons(self) -> List[str]:
        return list(self.error.get("reasons", []))

    def __str__(self) -> str:
        return "; ".join([super().__str__()] + self.reasons)


class NotFound(ApiError):
    """404: no such task, tool or route."""


class Conflict(ApiError):
    """409: the task is closed."""


class Unprocessable(ApiError):
    """422: understood but refused (a working file, a candidate rule file)."""


class RuleUnenforced(Unprocessable):
    """422 rule_unenforced: a rule of the tool that no layer in force on the host holds; the
    tool was not started. `rules` lists each (file, line, col, text, and why each layer that
    could hold it is not in force). Mark the rule `unenforceable: run` to start it anyway."""

    @property
    def rules(self) -> List[Dict[str, Any]]:
        return list(self.error.get("rules", []))


class TooManyRequests(ApiError):
    """429: too many open tasks."""


class ServiceUnavailable(ApiError):
    """503: the audit store refuses new runs, or the daemon is shutting down."""


_BY_STATUS = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    422: Unprocessable,
    429: TooManyRequests,
    503: ServiceUnavailable,
}
_BY_CODE = {"grant_widens": GrantWidens, "rule_unenforced": RuleUnenforced}


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float):
        super().__init__("agentd", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self._path)
        except OSError:
            s.close()
            raise
        self.sock = s


class Client:
    """One HTTP/1.1 request per connection: a Client may be shared by threads."""

    def __init__(
        self,
        socket_path: Optional[str] = None,
        *,
        url: Optional[str] = None,
        token: Optional[str] = None,
        timeout: float = 600.0,
        retry_unavailable: float = 0.0,
    ):
        if (socket_path is None) == (url is None):
            raise ValueError("give either socket_path or url")
        self.socket_path = socket_path
        self.timeout = timeout
        self.retry_unavailable = retry_unavailable
        self.token = token
        self._host = self._port = None
        if url is not None:
            u = urllib.parse.urlsplit(url)
            if u.scheme != "http" or not u.hostname:
                raise ValueError(f"url: expected http://HOST:PORT, got {url!r}")
            self._host, self._port = u.hostname, u.port or 80

    @classmethod
    def unix(cls, path: str = "/run/bulwark/agentd.sock", **kw: Any) -> "Client":
        return cls(path, **kw)

    @classmethod
    def tcp(cls, url: str, token: str, **kw: Any) -> "Client":
        return cls(url=url, token=token, **kw)

    # -- transport -------------------------------------------------------

    def _connection(self) -> http.client.HTTPConnection:
        if self.socket_path is not None:
            return _UnixHTTPConnection(self.socket_path, self.timeout)
        return http.client.HTTPConnection(self._host, self._port, timeout=self.timeout)

    def _send(self, method: str, path: str, body: Any, query: Optional[Dict[str, Any]]):
        target = path
        if query:
            q = {k: v for k, v in query.items() if v is not None}
            if q:
                target += "?" + urllib.parse.urlencode(q)
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        conn = self._connect(method, target)
        try:
            conn.request(method, target, body=data, headers=headers)
            return conn, conn.getresponse()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise ConnectionLost(f"{method} {target}: the connection ended before the reply: {e}") from e

    def _connect(self, method: str, target: str) -> http.client.HTTPConnection:
        """A connected connection; DaemonUnavailable (after retry_unavailable seconds of tries) if none."""
        deadline = time.monotonic() + self.retry_unavailable
        pause = 0.05
        while True:
            conn = self._connection()
            try:
                conn.connect()
                return conn
            except OSError as e:
                conn.close()
                if time.monotonic() + pause > deadline:
                    raise DaemonUnavailable(f"{method} {target}: no daemon accepted the connection: {e}") from e
            time.sleep(pause)
            pause = min(pause * 2, 1.0)

    @staticmethod
    def _raise(method: str, path: str, status: int, raw: bytes) -> None:
        try:
            doc = json.loads(raw)
            error = doc["error"] if isinstance(doc, dict) and isinstance(doc.get("error"), dict) else None
        except ValueError:
            error = None
        if error is None:
            error = {"code": "http_error", "message": raw.decode("utf-8", "replace")}
        code = str(error.get("code", "error"))
        cls = _BY_CODE.get(code) or _BY_STATUS.get(status, ApiError)
        raise cls(status, code, str(error.get("message", "")), error, method, path)

    def request(self, method: str, path: str, body: Any = None, query: Optional[Dict[str, Any]] = None) -> Any:
        """One call; the decoded JSON body, or an ApiError."""
        conn, resp = self._send(method, path, body, query)
        try:
            raw = resp.read()
        except (OSError, http.client.HTTPException) as e:
            raise ConnectionLost(f"{method} {path}: the connection ended during the reply: {e}") from e
        finally:
            conn.close()
        if resp.status >= 400:
            self._raise(method, path, resp.status, raw)
        ctype = resp.getheader("Content-Type", "")
        if "json" not in ctype:
            return raw.decode("utf-8", "replace")
        return json.loads(raw)

    # -- API -------------------------------------------------------------

    def health(self) -> Dict[str, Any]:
        """The daemon's state. A daemon that refuses runs (e.g. its audit store
        is out of space) answers 503 with the same document: returned, not raised;
        its "status" is then "refusing" and "audit.reason" says why."""
        try:
            return self.request("GET", "/v1/health")
        except ServiceUnavailable as e:
            try:
                doc = json.loads(e.error.get("message", ""))
            except ValueError:
                raise e from None
            if isinstance(doc, dict) and "status" in doc:
                return doc
            raise

    def tools(self) -> List[Dict[str, Any]]:
        return self.request("GET", "/v1/tools")["tools"]

    def tool(self, name: str) -> Dict[str, Any]:
        return self.request("GET", "/v1/tools/" + urllib.parse.quote(name, safe=""))

    def explain(self, name: str) -> str:
        return self.request("GET", f"/v1/tools/{urllib.parse.quote(name, safe='')}/explain")["text"]

    def judge(self, name: str, operation: Dict[str, Any], task: Optional[int] = None) -> Dict[str, Any]:
        """What the tool's rules (or a task's current grant) decide for one operation."""
        body: Dict[str, Any] = {"operation": operation}
        if task is not None:
            body["task"] = task
        return self.request("POST", f"/v1/tools/{urllib.parse.quote(name, safe='')}/explain", body)

    def create_task(
        self,
        tools: List[str],
        grant: Optional[Dict[str, Any]] = None,
        *,
        label: Optional[str] = None,
        workdir: Optional[str] = None,
    ) -> "Task":
        body: Dict[str, Any] = {"tools": list(tools)}
        if grant is not None:
            body["grant"] = grant
        if label is not None:
            body["label"] = label
        if workdir is not None:
            body["workdir"] = workdir
        return Task(self, self.request("POST", "/v1/tasks", body))

    def tasks(self) -> List[Dict[str, Any]]:
        return self.request("GET", "/v1/tasks")["tasks"]

    def task(self, task_id: int) -> Dict[str, Any]:
        return self.request("GET", f"/v1/tasks/{int(task_id)}")

    def update_grant(self, task_id: int, grant: Optional[Dict[str, Any]], expires_in_ms: Optional[int] = None):
        body: Dict[str, Any] = {"grant": grant}
        if expires_in_ms is not None:
            body["expires_in_ms"] = int(expires_in_ms)
        return self.request("PUT", f"/v1/tasks/{int(task_id)}/grant", body)

    def close_task(self, task_id: int) -> Dict[str, Any]:
        return self.request("DELETE", f"/v1/tasks/{int(task_id)}")

    def lift_narrowing(self, task_id: int, tool: str) -> Dict[str, Any]:
        """Lifts what the tool's behaviour profile narrowed in the task
        (respond: narrow): a new epoch under the task's grant alone. NotFound
        (not_narrowed) when the profile has not narrowed it."""
        return self.request("DELETE", f"/v1/tasks/{int(task_id)}/narrowings/{urllib.parse.quote(tool, safe='')}")

    def profiles(self) -> List[Dict[str, Any]]:
        """The behaviour profiles the daemon keeps (one per tool whose rules
        have a profile: block)."""
        return self.request("GET", "/v1/profiles")["profiles"]

    def profile(self, tool: str, task: Optional[int] = None) -> Dict[str, Any]:
        """A tool's profile, or with task= that task's own profile of it."""
        return self.request("GET", f"/v1/profiles/{urllib.parse.quote(tool, safe='')}",
                            query={"task": int(task)} if task is not None else None)

    @staticmethod
    def _exec_body(tool, argv, stdin, files, timeout_ms, client_ref) -> Dict[str, Any]:
        body: Dict[str, Any] = {"tool": tool, "argv": list(argv)}
        if client_ref is not None:
            body["client_ref"] = client_ref
        if stdin is not None:
            body["stdin"] = stdin
        if files is not None:
            body["files"] = dict(files)
        if timeout_ms is not None:
            body["timeout_ms"] = int(timeout_ms)
        return body

    def exec(
        self,
        task_id: int,
        tool: str,
        argv: List[str],
        *,
        stdin: Optional[str] = None,
        files: Optional[Dict[str, str]] = None,
        timeout_ms: Optional[int] = None,
        client_ref: Optional[str] = None,
    ) -> Dict[str, Any]:
        """Runs a tool of the task and waits: exit_status, stdout, stderr, denials (explained), ...
        client_ref names the run for cancel() from another thread."""
        return self.request(
            "POST",
            f"/v1/tasks/{int(task_id)}/exec",
            self._exec_body(tool, argv, stdin, files, timeout_ms, client_ref),
        )

    def cancel(self, task_id: int, client_ref: str) -> Dict[str, Any]:
        """Ends the task's running runs whose exec named client_ref: {"cancelled_runs": [run ids]}."""
        return self.request("POST", f"/v1/tasks/{int(task_id)}/cancel", {"client_ref": client_ref})

    def exec_stream(
        self,
        task_id: int,
        tool: str,
        argv: List[str],
        *,
        stdin: Optional[str] = None,
        files: Optional[Dict[str, str]] = None,
        timeout_ms: Optional[int] = None,
        client_ref: Optional[str] = None,
    ) -> Iterator[Tuple[str, Any]]:
        """Yields (event, data) as the run goes: ("run", {...}), ("stdout"|"stderr", {"data"}), ("exit", result)."""
        path = f"/v1/tasks/{int(task_id)}/exec/stream"
        conn, resp = self._send("POST", path, self._exec_body(tool, argv, stdin, files, timeout_ms, client_ref), None)
        try:
            if resp.status >= 400:
                self._raise("POST", path, resp.status, resp.read())
            event, data = "message", []
            while True:
                line = resp.readline()
                if not line:
                    raise ConnectionLost(f"POST {path}: the stream ended before the run's exit event")
                line = line.decode("utf-8", "replace").rstrip("\r\n")
                if line == "":
                    if data:
                        doc = json.loads("\n".join(data))
                        if event == "error":
                            err = doc.get("error", {})
                            raise ApiError(200, err.get("code", "error"), err.get("message", ""), err, "POST", path)
                        yield event, doc
                        if event == "exit":
                            return
                    event, data = "message", []
                elif line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].lstrip(" "))
        except (OSError, http.client.HTTPException) as e:
            raise ConnectionLost(f"POST {path}: the stream broke: {e}") from e
        finally:
            conn.close()

    def audit_page(self, **filters: Any) -> Dict[str, Any]:
        """One page of GET /v1/audit (filters: task run tool rule decision layer kind since_ns until_ns
        after_seq limit)."""
        return self.request("GET", "/v1/audit", query=filters)

    def audit(self, **filters: Any) -> Iterator[Dict[str, Any]]:
        """Every matching audit record in sequence order, following the keyset pages."""
        filters = dict(filters)
        while True:
            page = self.audit_page(**filters)
            yield from page.get("rows", [])
            nxt = page.get("next_after_seq")
            if nxt is None:
                return
            filters["after_seq"] = nxt

    def replay(self, tool: str, rules: str, **kw: Any) -> Dict[str, Any]:
        body = {"tool": tool, "rules": rules}
        body.update(kw)
        return self.request("POST", "/v1/replay", body)

    def propose(self, tool: str, **kw: Any) -> Dict[str, Any]:
        """Learning mode: the narrowest rules that would allow what the tool's
        recorded runs were refused (task=, since_ns=, until_ns=, max_records=),
        as a rule file extending the tool's, with its check."""
        body: Dict[str, Any] = {"tool": tool}
        body.update(kw)
        return self.request("POST", "/v1/propose", body)


class Task:
    """A task of the daemon: its id, work directory and the calls that take it."""

    def __init__(self, client: Client, summary: Dict[str, Any]):
        self.client = client
        self.summary = summary
        self.id: int = summary["id"]
        self.workdir: str = summary["workdir"]

    def exec(self, tool: str, argv: List[str], **kw: Any) -> Dict[str, Any]:
        return self.client.exec(self.id, tool, argv, **kw)

    def exec_stream(self, tool: str, argv: List[str], **kw: Any) -> Iterator[Tuple[str, Any]]:
        return self.client.exec_stream(self.id, tool, argv, **kw)

    def update_grant(self, grant: Optional[Dict[str, Any]], expires_in_ms: Optional[int] = None) -> Dict[str, Any]:
        return self.client.update_grant(self.id, grant, expires_in_ms)

    def cancel(self, client_ref: str) -> Dict[str, Any]:
        return self.client.cancel(self.id, client_ref)

    def lift_narrowing(self, tool: str) -> Dict[str, Any]:
        return self.client.lift_narrowing(self.id, tool)

    def refresh(self) -> Dict[str, Any]:
        return self.client.task(self.id)

    def audit(self, **filters: Any) -> Iterator[Dict[str, Any]]:
        return self.client.audit(task=self.id, **filters)

    def close(self) -> Dict[str, Any]:
        return self.client.close_task(self.id)

    def __enter__(self) -> "Task":
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.close()
        except BulwarkError:
            if exc[0] is None:
                raise
