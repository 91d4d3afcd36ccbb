// Drives an MCP server with the official TypeScript SDK (npm @modelcontextprotocol/sdk 1.32.2),
// for Steward's tests. Same line protocol as mcp_driver.py (see there); run from anywhere:
//   node tests/clients/mcp_driver.mjs
// The SDK is loaded from <repo>/target/nodedeps (scripts/install-deps.sh test puts it there;
// MCP_NODEDEPS overrides the directory). ESM ignores NODE_PATH, hence createRequire (CJS build).
// `--check` only tells whether the SDK loads (exit 0, or 3 when it is missing).
//
// Ops: connect{url,headers} | list_tools | call{name,arguments,progress,timeoutSecs} | ping |
//      session_id | close | exit.  Failures: {"ok":false,"error","code","status"}.
// SDK facts (read from dist/esm/client/streamableHttp.js, 1.32.2):
// - An HTTP error on a POST rejects the request with StreamableHTTPError whose .code is the HTTP
//   status (401, 404 ...); a JSON-RPC error reply gives McpError whose .code is the JSON-RPC code.
// - The transport keeps its session id until terminateSession(); after a server restart it keeps
//   sending the old id (404 from a server that forgot it). A POST that cannot connect just rejects
//   that request ("fetch failed"); the session stays usable once the server is back.
// - If the server dies while a call's SSE response is open (no priming event id), the SDK does not
//   fail the call: it waits for its timeout (timeoutSecs, default 120 here); the Python SDK fails it within ~1 s.
// - Client.close() does NOT send DELETE: close calls transport.terminateSession() first.
// - The standalone GET/SSE stream reopens with backoff (1 s, 1.5 s; maxRetries 2), then gives up
//   for good (reported to onerror only); it never ends the session. Headers from connect go on
//   every POST, GET and DELETE; initialize offers protocol 2025-11-25.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const nodedeps = process.env.MCP_NODEDEPS || path.join(root, 'target/nodedeps');
const require = createRequire(path.join(nodedeps, 'package.json'));
let sdk;
try {
  sdk = {
    ...require('@modelcontextprotocol/sdk/client/index.js'),
    ...require('@modelcontextprotocol/sdk/client/streamableHttp.js'),
    ...require('@modelcontextprotocol/sdk/types.js'),
  };
} catch (e) {
  // Tests skip when `--check` exits non-zero.
  console.error(`mcp_driver.mjs: the TypeScript MCP SDK is missing (${e.message}); run scripts/install-deps.sh test`);
  process.exit(3);
}
const { Client, StreamableHTTPClientTransport, StreamableHTTPError, McpError } = sdk;
if (process.argv[2] === '--check') {
  const pkg = path.join(nodedeps, 'node_modules/@modelcontextprotocol/sdk/package.json');
  const { version } = JSON.parse(readFileSync(pkg, 'utf8'));
  process.stdout.write(JSON.stringify({ ok: true, sdk: `@modelcontextprotocol/sdk ${version}` }) + '\n');
  process.exit(0);
}

// Only replies go to stdout.
const out = process.stdout;
console.log = console.info = console.debug = console.error;
const reply = (obj) => out.write(JSON.stringify(obj) + '\n');
const log = (...a) => console.error('mcp_driver.mjs:', ...a);
process.on('unhandledRejection', (e) => log('unhandled rejection', e));

let conn = null; // { client, transport, statuses: [[method, status]] }

async function connect(cmd) {
  if (conn) await close({});
  const statuses = [];
  // Records the HTTP status of every POST/DELETE (the SDK reports DELETE failures only via onerror).
  const trackingFetch = async (url, init) => {
    const res = await fetch(url, init);
    const method = (init?.method || 'GET').toUpperCase();
    if (method !== 'GET') statuses.push([method, res.status]);
    return res;
  };
  const transport = new StreamableHTTPClientTransport(new URL(cmd.url), {
    requestInit: { headers: cmd.headers || {} },
    fetch: trackingFetch,
  });
  const client = new Client({ name: 'steward-tests', version: '0' }, { capabilities: {} });
  client.onerror = (e) => log('transport error:', e?.message ?? e);
  try {
    await client.connect(transport, { timeout: (cmd.timeoutSecs ?? 30) * 1000 });
  } catch (e) {
    await client.close().catch(() => {});
    throw e;
  }
  conn = { client, transport, statuses };
  return {
    sessionId: transport.sessionId ?? null,
    protocolVersion: transport.protocolVersion ?? null,
    serverInfo: client.getServerVersion() ?? null,
    capabilities: client.getServerCapabilities() ?? null,
  };
}

async function close(_cmd) {
  if (!conn) return { deleteStatus: null };
  const { client, transport, statuses } = conn;
  conn = null;
  statuses.length = 0;
  try {
    await transport.terminateSession(); // DELETE with the session id (no-op without one)
  } catch (e) {
    log('terminateSession failed:', e?.message ?? e);
  }
  await client.close().catch(() => {});
  const del = statuses.find(([m]) => m === 'DELETE');
  return { deleteStatus: del ? del[1] : null };
}

function need() {
  if (!conn) throw Object.assign(new Error('send connect first'), { name: 'NotConnected' });
  return conn;
}

async function listTools(cmd) {
  const { tools } = await need().client.listTools(undefined, { timeout: (cmd.timeoutSecs ?? 120) * 1000 });
  return {
    tools: tools.map((t) => ({
      name: t.name,
      description: t.description ?? null,
      inputSchema: t.inputSchema,
      ...(t.outputSchema ? { outputSchema: t.outputSchema } : {}),
    })),
  };
}

async function call(cmd) {
  const progress = [];
  const options = { timeout: (cmd.timeoutSecs ?? 120) * 1000 };
  // onprogress makes the SDK send a progressToken in the request's _meta.
  if (cmd.progress) {
    options.onprogress = (p) =>
      progress.push({ progress: p.progress, total: p.total ?? null, message: p.message ?? null });
  }
  const result = await need().client.callTool({ name: cmd.name, arguments: cmd.arguments || {} }, undefined, options);
  const content = result.content || [];
  return {
    isError: !!result.isError,
    text: content.filter((c) => c.type === 'text').map((c) => c.text),
    content,
    structuredContent: result.structuredContent ?? null,
    progress,
  };
}

const OPS = {
  connect,
  close,
  list_tools: listTools,
  call,
  ping: async (cmd) => (await need().client.ping({ timeout: (cmd.timeoutSecs ?? 30) * 1000 }), {}),
  session_id: async () => ({ sessionId: conn?.transport.sessionId ?? null }),
};

function failure(e) {
  const isHttp = e instanceof StreamableHTTPError;
  return {
    ok: false,
    error: `${e?.name === 'Error' && isHttp ? 'StreamableHTTPError' : e?.name ?? 'Error'}: ${e?.message ?? e}`,
    code: e instanceof McpError ? e.code : null,
    // StreamableHTTPError.code is the HTTP status (-1 for a bad content type).
    status: isHttp && e.code > 0 ? e.code : null,
  };
}

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const raw of rl) {
  const line = raw.trim();
  if (!line) continue;
  let cmd;
  try {
    cmd = JSON.parse(line);
    if (cmd.op === 'exit') break;
    const op = OPS[cmd.op];
    if (!op) throw Object.assign(new Error(JSON.stringify(cmd.op)), { name: 'UnknownOp' });
    reply({ ok: true, ...(await op(cmd)) });
  } catch (e) {
    reply(failure(e));
  }
}
await close({});
reply({ ok: true });
process.exit(0);
