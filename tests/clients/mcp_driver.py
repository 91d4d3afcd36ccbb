#!/usr/bin/env python3
"""Drives an MCP server with the official Python SDK (PyPI `mcp` 2.3.0), for Steward's tests.

Run:  python3 -u tests/clients/mcp_driver.py   (from the repo root; PYTHONPATH=target/pydeps
is optional, the driver finds <repo>/target/pydeps itself). scripts/install-deps.sh test installs
the SDK there; nothing here touches the network except the server under test.

Protocol: one JSON command per line on stdin, exactly one JSON reply per line on stdout;
logs go to stderr (MCP_DRIVER_LOG=debug for the SDK's own debug logs). `--check` only tells
whether the SDK loads (exit 0, or 3 when it is missing).
  {"op":"connect","url":U,"headers":{..}}  -> {"ok":true,"sessionId","protocolVersion","serverInfo","capabilities"}
  {"op":"connect_stateless","url":U,"headers":{..}}
        -> {"ok":true,"sessionId":null,"protocolVersion","serverInfo","capabilities","supportedVersions"}
  {"op":"list_tools"}                      -> {"ok":true,"tools":[{"name","description","inputSchema","outputSchema"?}]}
  {"op":"call","name":N,"arguments":{..},"progress":bool,"timeoutSecs":T?}
        -> {"ok":true,"isError","text":[..],"content":[..],"structuredContent","progress":[{"progress","total","message"}]}
  {"op":"ping"}                            -> {"ok":true}
  {"op":"session_id"}                      -> {"ok":true,"sessionId"}
  {"op":"close"}                           -> {"ok":true,"deleteStatus": status of the SDK's DELETE or null}
  {"op":"exit"}                            -> {"ok":true}, then the process exits
Any failure -> {"ok":false,"error":"<Type>: <message>","code":<JSON-RPC code or null>,"status":<HTTP status or null>}
and the driver keeps reading commands.

SDK facts this relies on (read from mcp/client/streamable_http.py, 2.3.0):
- The transport turns an HTTP error on a POST into a JSON-RPC error (404 with a session id ->
  INVALID_REQUEST "Session terminated"; other >= 400 -> INTERNAL_ERROR "Server returned an error
  response"; a JSON-RPC error body at a non-2xx status is surfaced as is), so the HTTP status is
  lost; an httpx2 response hook records it here instead.
- The session id is taken from the `initialize` response only, and then sent on every request
  until the session is closed: a restarted server is sent the old id (no implicit reconnect);
  a server that accepts it again just carries on, one that does not answers 404 (-> status 404).
- `connect` runs the `initialize` handshake (offers 2025-11-25); the SDK's 2026-07-28
  `server/discover` era is not used there (see connect_stateless below). Headers given to connect go on every POST, GET and DELETE.
- The standalone GET/SSE stream (opened after `initialized`) is a background task that catches
  its own errors, so a dropped GET never kills the session: it reopens after 1 s, and gives up
  quietly after 2 failed tries in a row (e.g. a server down > ~2 s, or answering 404). From then
  on nothing arrives outside a request's own POST response; POST responses (and progress sent
  on them as SSE) are unaffected. Progress sent only on the GET stream (a server answering POSTs
  with application/json) is delivered while that stream is open.
- A POST that cannot reach the server at all (connection refused) raises out of the SDK
  transport's task group and would end the whole connection. The driver's httpx2 transport
  (SurvivePostErrors) turns such an error into a synthetic 502, which the SDK reports as a JSON-RPC
  error for that one request: the reply is ok:false with the real error ("ConnectError: ...",
  status null) and the session, with its id, stays usable once the server is back (as with the
  TypeScript SDK). Anything else that ends the transport makes later ops say "NotConnected".
- `close` exits the SDK's context managers; the transport then sends DELETE with the session id
  (terminate_on_close=True), whose status is reported as deleteStatus.

connect_stateless (the 2026-07-28 revision, SEP-2567: no `initialize`, no sessions) uses the same
transport and ClientSession, but runs ClientSession.discover() instead of initialize():
- One POST `server/discover` proposing LATEST_MODERN_VERSION (2026-07-28); on -32022 the SDK
  retries once at the highest mutual modern version, then adopt()s the DiscoverResult. There is
  no fallback to `initialize` (that is the SDK's Client(mode="auto") policy, not used here): a
  server that does not speak discover fails the op (e.g. code -32601), and the driver is then
  not connected.
- From then on every request is stamped by the SDK: params._meta carries
  io.modelcontextprotocol/protocolVersion, clientInfo and clientCapabilities, and the POST carries
  MCP-Protocol-Version: 2026-07-28, Mcp-Method and (tools/call, prompts/get, resources/read)
  Mcp-Name, besides the connect headers.
  No `notifications/initialized` is sent, so the SDK never opens the standalone GET stream.
- The transport takes Mcp-Session-Id only from an `initialize` response, so it never sends one in
  this mode and `close` sends no DELETE (deleteStatus null). sessionId (here and in session_id)
  is still the driver's observation: null unless the server put an Mcp-Session-Id on a response
  (which a conforming server does not; the SDK ignores it anyway), so a test can catch that.
- protocolVersion is the version the SDK adopted; serverInfo comes from the DiscoverResult's
  _meta io.modelcontextprotocol/serverInfo stamp (null if the server omits it).
- `call` with progress works as before: the progressToken goes in _meta and the server's
  notifications/progress arrive on that request's own POST response (SSE); there is no other
  channel (a server answering with application/json cannot send progress at all). `ping` is
  removed in 2026-07-28; the SDK still sends it (stamped), and what comes back is up to the server
  (rmcp and the Python SDK answer -32601 at HTTP 404).
- The SDK validates results against the 2026-07-28 schema: e.g. a tools/list result without
  `ttlMs`/`cacheScope` fails the op with "ValidationError: ... ListToolsResult ...".
"""

import json
import logging
import os
import sys

# The SDK lives in <repo>/target/pydeps (or MCP_PYDEPS), so PYTHONPATH is optional.
_PYDEPS = os.environ.get("MCP_PYDEPS") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../target/pydeps")
if os.path.isdir(_PYDEPS):
    sys.path.insert(0, os.path.normpath(_PYDEPS))

try:
    import anyio
    import httpx2
    from mcp import ClientSession, MCPError
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT
    from mcp_types import CONNECTION_CLOSED
except ImportError as e:  # tests skip when `--check` exits non-zero
    print(f"mcp_driver.py: the Python MCP SDK is missing ({e}); run scripts/install-deps.sh test", file=sys.stderr)
    sys.exit(3)
if sys.argv[1:] == ["--check"]:
    from importlib.metadata import version

    print(json.dumps({"ok": True, "sdk": f"mcp {version('mcp')}"}))
    sys.exit(0)

# Only replies go to the real stdout; anything else printing goes to stderr.
OUT = sys.stdout
sys.stdout = sys.stderr
logging.basicConfig(
    stream=sys.stderr,
    level=logging.DEBUG if os.environ.get("MCP_DRIVER_LOG") == "debug" else logging.WARNING,
    format="mcp_driver.py %(levelname)s %(name)s: %(message)s",
)
log = logging.getLogger("mcp_driver")
DEFAULT_TIMEOUT = 120.0
SYNTHETIC = "x-mcp-driver-synthetic"


def reply(obj):
    OUT.write(json.dumps(obj) + "\n")
    OUT.flush()


def leaf(exc):
    """The first non-group exception inside (possibly nested) exception groups."""
    while isinstance(getattr(exc, "exceptions", None), tuple) and exc.exceptions:  # (Base)ExceptionGroup
        exc = exc.exceptions[0]
    return exc


def dump(model):
    return None if model is None else model.model_dump(by_alias=True, mode="json", exclude_none=True)


class OpFailed(Exception):
    pass


class SurvivePostErrors(httpx2.AsyncBaseTransport):
    """httpx2 transport: a POST that cannot reach the server answers a synthetic 502 (see top)."""

    def __init__(self, conn):
        self.inner, self.conn = httpx2.AsyncHTTPTransport(), conn

    async def handle_async_request(self, request):
        try:
            return await self.inner.handle_async_request(request)
        except httpx2.TransportError as e:
            if request.method != "POST":
                raise  # the SDK handles GET (retries) and DELETE (logs) errors itself
            log.warning("POST failed: %r", e)
            self.conn.transport_errors.append(e)
            return httpx2.Response(502, headers={SYNTHETIC: "1"}, request=request)

    async def aclose(self):
        await self.inner.aclose()


class Connection:
    """One streamable HTTP client + ClientSession, owned by a background task (run)."""

    def __init__(self, url, headers):
        self.url, self.headers = url, headers
        self.session = None
        self.ready = anyio.Event()  # set once the session is entered, or the owner failed
        self.done = anyio.Event()  # set when the owner task has exited
        self.stop = anyio.Event()  # set by close
        self.error = None  # what ended the connection, if it ended by itself
        self.statuses = []  # (method, HTTP status) of POST/DELETE responses, cleared per op
        self.session_id = None  # as assigned by the server / sent by the SDK
        self.transport_errors = []  # POSTs that never reached the server, cleared per op

    async def _on_request(self, request):
        sid = request.headers.get("mcp-session-id")
        if sid:
            self.session_id = sid

    async def _on_response(self, response):
        method = response.request.method
        if response.headers.get(SYNTHETIC):
            return
        if method in ("POST", "DELETE"):
            self.statuses.append((method, response.status_code))
        sid = response.headers.get("mcp-session-id")
        if sid and method == "POST" and self.session_id is None:
            self.session_id = sid

    async def run(self):
        # As mcp.shared._httpx_utils.create_mcp_http_client, plus our transport and hooks.
        client = httpx2.AsyncClient(
            headers=dict(self.headers),
            timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
            transport=SurvivePostErrors(self),
            event_hooks={"request": [self._on_request], "response": [self._on_response]},
        )
        try:
            async with client, streamable_http_client(self.url, http_client=client) as (r, w):
                async with ClientSession(r, w) as session:
                    self.session = session
                    self.ready.set()
                    await self.stop.wait()
        except BaseException as e:  # noqa: BLE001 - report whatever ended the transport
            if not isinstance(e, anyio.get_cancelled_exc_class()):
                self.error = leaf(e)
                log.warning("connection ended: %r", self.error)
            else:
                raise
        finally:
            self.session = None
            self.ready.set()
            self.done.set()

    def http_status(self, methods=("POST",)):
        """The last HTTP error status (>= 400) seen during the current op, if any."""
        for method, status in reversed(self.statuses):
            if method in methods and status >= 400:
                return status
        return None

    async def guarded(self, fn, timeout):
        """Await fn(); fail if it times out or the connection dies meanwhile."""
        if self.session is None:
            raise OpFailed(f"NotConnected: {describe(self.error) if self.error else 'no open session'}")
        self.statuses.clear()
        self.transport_errors.clear()
        out = {}

        async def work():
            try:
                out["value"] = await fn(self.session)
            except Exception as e:  # noqa: BLE001
                out["error"] = e
            tg.cancel_scope.cancel()

        async def watch():
            await self.done.wait()
            out.setdefault("error", OpFailed(f"ConnectionClosed: {describe(self.error) or 'transport ended'}"))
            tg.cancel_scope.cancel()

        with anyio.move_on_after(timeout) as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(work)
                tg.start_soon(watch)
        if scope.cancelled_caught and not out:
            raise OpFailed(f"TimeoutError: no answer within {timeout}s")
        if isinstance(out.get("error"), MCPError) and out["error"].code == CONNECTION_CLOSED:
            # The transport died (e.g. connection refused): report its error, not the SDK's echo of it.
            with anyio.move_on_after(1):
                await self.done.wait()
            if self.error is not None:
                raise OpFailed(f"ConnectionClosed: {describe(self.error)}")
        if "error" in out and self.transport_errors:
            raise OpFailed(describe(self.transport_errors[-1]))
        if "error" in out:
            raise out["error"]
        return out["value"]


def describe(exc):
    if exc is None:
        return None
    exc = leaf(exc)
    if isinstance(exc, OpFailed):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


async def do_connect(state, cmd, stateless=False):
    if state.get("conn") is not None:
        await do_close(state, {})
    conn = Connection(cmd["url"], cmd.get("headers") or {})
    state["tg"].start_soon(conn.run)
    await conn.ready.wait()
    state["conn"] = conn

    async def handshake(s):
        if stateless:  # server/discover at 2026-07-28, then adopt() (module docstring)
            result = await s.discover()
            return result, s.protocol_version, s.server_info
        result = await s.initialize()
        return result, result.protocol_version, result.server_info

    try:
        result, version, server_info = await conn.guarded(handshake, cmd.get("timeoutSecs", 30))
    except Exception as e:
        status = conn.http_status()  # before close clears it
        await do_close(state, {})
        e.http_status = status
        raise
    out = {
        "sessionId": conn.session_id,
        "protocolVersion": version,
        "serverInfo": dump(server_info),
        "capabilities": dump(result.capabilities),
    }
    if stateless:
        out["supportedVersions"] = list(result.supported_versions)
    return out


async def do_connect_stateless(state, cmd):
    return await do_connect(state, cmd, stateless=True)


async def do_close(state, cmd):
    conn = state.pop("conn", None)
    if conn is None:
        return {"deleteStatus": None}
    conn.statuses.clear()
    conn.stop.set()
    with anyio.move_on_after(cmd.get("timeoutSecs", 10)):
        await conn.done.wait()
    return {"deleteStatus": next((s for m, s in conn.statuses if m == "DELETE"), None)}


async def do_list_tools(state, cmd):
    result = await conn_of(state).guarded(lambda s: s.list_tools(), cmd.get("timeoutSecs", DEFAULT_TIMEOUT))
    tools = []
    for tool in result.tools:
        d = dump(tool)
        t = {"name": d["name"], "description": d.get("description"), "inputSchema": d.get("inputSchema")}
        if d.get("outputSchema") is not None:
            t["outputSchema"] = d["outputSchema"]
        tools.append(t)
    return {"tools": tools}


async def do_call(state, cmd):
    progress = []

    async def on_progress(value, total, message):
        progress.append({"progress": value, "total": total, "message": message})

    timeout = cmd.get("timeoutSecs")
    result = await conn_of(state).guarded(
        lambda s: s.call_tool(
            cmd["name"],
            cmd.get("arguments") or {},
            read_timeout_seconds=timeout,
            # A progress_callback makes the SDK put a progressToken in the request's _meta.
            progress_callback=on_progress if cmd.get("progress") else None,
        ),
        (timeout or DEFAULT_TIMEOUT) + 5,
    )
    content = [dump(c) for c in result.content]
    return {
        "isError": bool(result.is_error),
        "text": [c["text"] for c in content if c.get("type") == "text"],
        "content": content,
        "structuredContent": result.structured_content,
        "progress": progress,
    }


async def do_ping(state, cmd):
    await conn_of(state).guarded(lambda s: s.send_ping(), cmd.get("timeoutSecs", 30))
    return {}


def conn_of(state):
    conn = state.get("conn")
    if conn is None:
        raise OpFailed("NotConnected: send connect first")
    return conn


OPS = {
    "connect": do_connect,
    "connect_stateless": do_connect_stateless,
    "list_tools": do_list_tools,
    "call": do_call,
    "ping": do_ping,
    "session_id": lambda state, cmd: _session_id(state),
    "close": do_close,
}


async def _session_id(state):
    conn = state.get("conn")
    return {"sessionId": conn.session_id if conn else None}


async def main():
    state = {}
    stdin = anyio.wrap_file(sys.stdin)
    async with anyio.create_task_group() as tg:
        state["tg"] = tg
        while True:
            line = await stdin.readline()
            if not line:
                break  # EOF: same as exit
            line = line.strip()
            if not line:
                continue
            try:
                cmd = json.loads(line)
                op = cmd.get("op")
                if op == "exit":
                    break
                if op not in OPS:
                    raise OpFailed(f"UnknownOp: {op!r}")
                reply({"ok": True, **(await OPS[op](state, cmd))})
            except Exception as e:  # noqa: BLE001 - every failure becomes a reply
                conn = state.get("conn")
                err = leaf(e)
                status = getattr(e, "http_status", None) or (conn.http_status() if conn else None)
                reply({
                    "ok": False,
                    "error": describe(err),
                    "code": err.code if isinstance(err, MCPError) else None,
                    "status": status,
                })
        await do_close(state, {})
        reply({"ok": True})
        tg.cancel_scope.cancel()


if __name__ == "__main__":
    anyio.run(main)
