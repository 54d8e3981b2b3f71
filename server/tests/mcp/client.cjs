// A real MCP client for the tests: the official TypeScript SDK (pinned in agents/), driven
// by the Rust test one JSON line at a time on stdin, answering one JSON line per request
// on stdout: {"ok": result} or {"error": {"message", "code"}}. Notifications it receives
// are kept and handed over by the "notifications" op.
//
// Environment: SDK_DIR (agents/, where node_modules holds the SDK), MCP_TRANSPORT (http
// or stdio), MCP_URL (the server), MCP_TOKEN (sent as a bearer token over HTTP; given to
// the stdio server as STEPWISE_TOKEN), STEPWISE_BIN (the stdio server's binary).
"use strict";
const { createRequire } = require("node:module");
const readline = require("node:readline");
const path = require("node:path");

const sdk = createRequire(path.join(process.env.SDK_DIR, "package.json"));
const { Client } = sdk("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = sdk("@modelcontextprotocol/sdk/client/streamableHttp.js");
const { StdioClientTransport } = sdk("@modelcontextprotocol/sdk/client/stdio.js");
const types = sdk("@modelcontextprotocol/sdk/types.js");

const notifications = [];
let client;

function transport() {
  const url = process.env.MCP_URL;
  const token = process.env.MCP_TOKEN;
  if (process.env.MCP_TRANSPORT === "stdio") {
    const env = { PATH: process.env.PATH, STEPWISE_SERVER: url };
    if (token) env.STEPWISE_TOKEN = token;
    return new StdioClientTransport({
      command: process.env.STEPWISE_BIN,
      args: ["mcp"],
      env,
      stderr: "inherit",
    });
  }
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  return new StreamableHTTPClientTransport(new URL("/mcp", url), { requestInit: { headers } });
}

const ops = {
  async connect() {
    client = new Client({ name: "stepwise-tests", version: "0" });
    client.setNotificationHandler(types.ResourceUpdatedNotificationSchema, (n) => {
      notifications.push(n);
    });
    await client.connect(transport());
    return { server: client.getServerVersion(), capabilities: client.getServerCapabilities() };
  },
  async tools() {
    return client.listTools();
  },
  async call({ name, arguments: args }) {
    return client.callTool({ name, arguments: args ?? {} });
  },
  async resources({ cursor }) {
    return client.listResources(cursor ? { cursor } : {});
  },
  async templates() {
    return client.listResourceTemplates();
  },
  async read({ uri }) {
    return client.readResource({ uri });
  },
  async subscribe({ uri }) {
    return client.subscribeResource({ uri });
  },
  async notifications() {
    return notifications.splice(0);
  },
  async close() {
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
    answer = { error: { message: String(error && error.message), code: error && error.code } };
  }
  process.stdout.write(JSON.stringify(answer) + "\n");
});
lines.on("close", () => process.exit(0));
