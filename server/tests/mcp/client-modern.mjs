// The official TypeScript SDK, v2 (pinned in agents/), as a 2026-07-28 MCP client over
// streamable HTTP, with the official tasks extension package on top: what a client that
// runs tools as tasks does. Driven like client.cjs: one JSON line per request on stdin,
// one {"ok": result} or {"error": {"message", "code"}} line per answer on stdout.
//
// The tasks package sends its own tools/call and tasks/* requests, framed for 2026-07-28,
// through a dispatcher its host supplies (`rawDispatch`): the SDK's own codecs do not take
// a task as a tools/call result yet. The one here is a plain HTTP POST, headers as the
// SDK's transport sets them.
//
// Environment: SDK_DIR (agents/), MCP_URL (the server), MCP_TOKEN (the bearer token).
import { readFileSync } from "node:fs";
import path from "node:path";
import readline from "node:readline";
import { pathToFileURL } from "node:url";

const PROTOCOL = "2026-07-28";
const CLIENT_INFO = { name: "stepwise-tests-modern", version: "0" };

// These packages export ESM only, which `require.resolve` cannot see: their `import`
// entry is read from package.json, as Node's own resolver would.
async function load(name, subpath = ".") {
  const dir = path.join(process.env.SDK_DIR, "node_modules", name);
  const manifest = JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8"));
  let entry = manifest.exports[subpath];
  while (typeof entry === "object") entry = entry.import ?? entry.default;
  return import(pathToFileURL(path.join(dir, entry)).href);
}
const { Client, StreamableHTTPClientTransport } = await load("@modelcontextprotocol/client");
const { createTaskSessionFromClient } = await load("@modelcontextprotocol/ext-tasks", "./client");

const endpoint = new URL("/mcp", process.env.MCP_URL);
const token = process.env.MCP_TOKEN;
const notifications = [];
const executions = new Map();
let client;
let session;

// The header the server checks `params.taskId` or `params.name` against, as the SDK's
// transport derives it; our names and ids are plain ASCII.
function mcpName(message) {
  const params = message.params ?? {};
  if (message.method === "tools/call") return params.name;
  if (message.method.startsWith("tasks/")) return params.taskId;
  return undefined;
}

let nextId = 1;

// The package hands over a request without its JSON-RPC frame, and takes back the
// response's result or error.
async function rawDispatch(request, options) {
  const message = { jsonrpc: "2.0", id: `raw-${nextId++}`, ...request };
  const answer = await post(message, options);
  return "error" in answer ? { kind: "error", error: answer.error } : { kind: "result", result: answer.result };
}

async function post(message, options) {
  const headers = {
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
    authorization: `Bearer ${token}`,
    "mcp-protocol-version": message.params?._meta?.["io.modelcontextprotocol/protocolVersion"] ?? PROTOCOL,
    "mcp-method": message.method,
  };
  const name = mcpName(message);
  if (name !== undefined) headers["mcp-name"] = name;
  const response = await fetch(endpoint, {
    method: "POST",
    headers,
    body: JSON.stringify(message),
    signal: options?.signal,
  });
  const text = await response.text();
  if (!(response.headers.get("content-type") ?? "").includes("text/event-stream")) {
    return JSON.parse(text);
  }
  // An SSE answer: the response is the data line whose id is the request's.
  for (const line of text.split("\n")) {
    if (!line.startsWith("data:")) continue;
    const data = line.slice(5).trim();
    if (!data) continue;
    const parsed = JSON.parse(data);
    if (parsed.id === message.id && ("result" in parsed || "error" in parsed)) return parsed;
  }
  throw new Error(`no answer to ${message.method} in: ${text.slice(0, 500)}`);
}

const ops = {
  async connect() {
    client = new Client(CLIENT_INFO, {
      capabilities: {},
      versionNegotiation: { mode: { pin: PROTOCOL } },
    });
    client.setNotificationHandler("notifications/resources/updated", (n) => {
      notifications.push(n);
    });
    const headers = { Authorization: `Bearer ${token}` };
    await client.connect(new StreamableHTTPClientTransport(endpoint, { requestInit: { headers } }));
    session = createTaskSessionFromClient(client, {
      endpointId: "stepwise-tests",
      rawDispatch,
      v2RequestFraming: { protocolVersion: PROTOCOL, clientInfo: CLIENT_INFO, clientCapabilities: {} },
    });
    return { era: client.getProtocolEra(), capabilities: client.getServerCapabilities() };
  },
  async tools() {
    return client.listTools();
  },
  // A tool called through the tasks session: a task's id, or an immediate result.
  async call({ name, arguments: args }) {
    const execution = await session.callTool(name, args ?? {});
    if (execution.kind !== "task") {
      return { kind: execution.kind, outcome: (await execution.settle()).outcome };
    }
    executions.set(execution.handle.taskId, execution);
    return { kind: "task", taskId: execution.handle.taskId };
  },
  // Follows a task to its end, as the package polls `tasks/get`: every status it saw,
  // and the outcome.
  async settle({ taskId }) {
    const seen = [];
    const { outcome, lastTask } = await executions.get(taskId).settle({
      onEvent: (event) => {
        if (event.type === "task") seen.push({ status: event.task.status, message: event.task.statusMessage });
      },
    });
    return { seen, outcome, lastTask };
  },
  // Waits until the task's status message contains `text`.
  async until({ taskId, text }) {
    for await (const event of executions.get(taskId).updates()) {
      if (event.type === "task" && (event.task.statusMessage ?? "").includes(text)) return event.task;
      if (event.type === "outcome") return { ended: event.outcome.status };
    }
    return {};
  },
  async cancel({ taskId }) {
    await executions.get(taskId).cancel();
    return {};
  },
  // One `tasks/get`, as the package frames it: the task as the server sees it now.
  async get({ taskId }) {
    const _meta = {
      "io.modelcontextprotocol/protocolVersion": PROTOCOL,
      "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
      "io.modelcontextprotocol/clientCapabilities": { extensions: { "io.modelcontextprotocol/tasks": {} } },
    };
    return rawDispatch({ method: "tasks/get", params: { taskId, _meta } });
  },
  async listen({ uris }) {
    const subscription = await client.listen({ resourceSubscriptions: uris });
    return { honored: subscription.honoredFilter };
  },
  async notifications() {
    return notifications.splice(0);
  },
  async close() {
    await session.close();
    await client.close();
    return {};
  },
};

const lines = readline.createInterface({ input: process.stdin });
lines.on("line", async (line) => {
  const request = JSON.parse(line);
  let answer;
  try {
    answer = { ok: await ops[request.op](request) };
  } catch (error) {
    answer = { error: { message: String(error && (error.stack || error.message)), code: error && error.code } };
  }
  process.stdout.write(JSON.stringify(answer) + "\n");
});
lines.on("close", () => process.exit(0));
