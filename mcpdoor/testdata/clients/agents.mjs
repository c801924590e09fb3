// A real MCP client against the door: the OpenAI Agents SDK for JS
// (@openai/agents), its MCPServerStreamableHttp, driven directly (no
// model): connect, listTools, callTool, close. mcpdoor's
// TestOpenAIAgentsClient runs it with Node 22 and CLIENTS_DIR at the npm
// prefix the packages are installed in, and reads the JSON lines it
// prints on stdout, one per step.
//
//   CLIENTS_DIR=… DOOR_URL=http://127.0.0.1:PORT/mcp DOOR_TOKEN=… node agents.mjs
import { createRequire } from 'node:module';

const require = createRequire(process.env.CLIENTS_DIR + '/');
const { MCPServerStreamableHttp } = require('@openai/agents');

const emit = (event, fields) => process.stdout.write(JSON.stringify({ event, ...fields }) + '\n');
const text = (content) =>
  (Array.isArray(content) ? content : [content]).filter((c) => c && c.type === 'text').map((c) => c.text).join('\n');

const server = new MCPServerStreamableHttp({
  url: process.env.DOOR_URL,
  name: 'toolruntime-door',
  requestInit: { headers: { Authorization: 'Bearer ' + process.env.DOOR_TOKEN } },
});
await server.connect();
try {
  emit('connected', { session: server.sessionId ?? '' });
  const tools = await server.listTools();
  emit('listed', { names: tools.map((t) => t.name) });

  const echo = await server.callTool('echo', { text: 'hello from the Agents SDK' });
  emit('echo', { text: text(echo) });

  const failed = await server.callToolResult('fail', { text: 'on purpose' });
  emit('error', { text: text(failed.content), isError: !!failed.isError });

  const where = await server.callToolResult('where', {});
  emit('structured', { structured: where.structuredContent ?? null, text: text(where.content) });
  // A call held for a person's approval: the request waits until the
  // fleet's side decides.
  const approved = await server.callToolResult('confirm_delete', { path: '/tmp/report.txt' });
  emit('approved', { text: text(approved.content), isError: !!approved.isError });
  emit('done', {});
} finally {
  await server.close();
}
