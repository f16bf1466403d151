// The TypeScript MCP SDK's client (@modelcontextprotocol/sdk, installed by `make mcp-sdk`) against the service's
// remote MCP endpoint: lists the tools and calls get_run. Prints one JSON line for tests/e2e/test_mcp.py.
// Usage: node mcp_client.mjs <node_modules dir> <url> <api key> <run id>
import path from "node:path";
import { pathToFileURL } from "node:url";

const [modules, url, apiKey, runId] = process.argv.slice(2);
const sdk = (file) => import(pathToFileURL(path.join(modules, "@modelcontextprotocol/sdk/dist/esm", file)).href);
const { Client } = await sdk("client/index.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");

const client = new Client({ name: "canvas-e2e-typescript", version: "1.0.0" });
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${apiKey}` } },
});
await client.connect(transport);
const { tools } = await client.listTools();
const run = await client.callTool({ name: "get_run", arguments: { run_id: runId } });
const missing = await client.callTool({ name: "get_run", arguments: { run_id: "00000000-0000-4000-8000-000000000000" } });
console.log(
  JSON.stringify({
    tools: tools.map((tool) => tool.name),
    output_schema: tools.find((tool) => tool.name === "get_run").outputSchema?.type ?? null,
    run: run.structuredContent,
    run_text: run.content[0].text,
    missing: { isError: missing.isError, text: missing.content[0].text },
  }),
);
await client.close();
