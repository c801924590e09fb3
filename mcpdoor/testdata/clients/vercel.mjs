// A real MCP client against the door: the Vercel AI SDK's createMCPClient
// (@ai-sdk/mcp), whose Streamable HTTP transport is its own, not the
// TypeScript SDK's. mcpdoor's TestVercelAIClient runs it with Node 22 and
// CLIENTS_DIR at the npm prefix the packages are installed in, and reads
// the JSON lines it prints on stdout, one per step.
//
//   CLIENTS_DIR=… DOOR_URL=http://127.0.0.1:PORT/mcp DOOR_TOKEN=… \
//   DISCOVERY=1 node vercel.mjs
//
// DISCOVERY=1 lets the client probe with server/discover (2026-07-28);
// DISCOVERY=0 makes it initialize (the 2025 era). It exits 0 when every
// step got what it should, 1 otherwise (the reason on stderr).
import { createRequire } from 'node:module';

const require = createRequire(process.env.CLIENTS_DIR + '/');
const { createMCPClient } = await import(require.resolve('@ai-sdk/mcp'));

const emit = (event, fields) => process.stdout.write(JSON.stringify({ event, ...fields }) + '\n');
const fail = (msg) => {
  process.stderr.write('vercel.mjs: ' + msg + '\n');
  process.exit(1);
};
const text = (r) => (r.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');

const client = await createMCPClient({
  clientName: 'toolruntime-vercel-test',
  protocolVersionDiscovery: process.env.DISCOVERY === '1',
  transport: {
    type: 'http',
    url: process.env.DOOR_URL,
    headers: { Authorization: 'Bearer ' + process.env.DOOR_TOKEN },
  },
});
try {
  emit('connected', { version: client.initializeResult.protocolVersion });

  const listed = await client.listTools();
  emit('listed', { names: listed.tools.map((t) => t.name) });

  // The AI SDK's own tool set: what a model gets, executed as the
  // generateText loop would.
  const tools = await client.tools();
  if (!tools.echo || typeof tools.echo.execute !== 'function') fail('tools() has no echo');
  const viaTool = await tools.echo.execute({ text: 'via the tool set' }, { toolCallId: 'c1', messages: [] });
  emit('tool-set', { text: text(viaTool) });

  const echo = await client.callTool({ name: 'echo', arguments: { text: 'hello from the AI SDK' } });
  emit('echo', { text: text(echo), isError: !!echo.isError });

  const failed = await client.callTool({ name: 'fail', arguments: { text: 'on purpose' } });
  emit('error', { text: text(failed), isError: !!failed.isError });

  const where = await client.callTool({ name: 'where', arguments: {} });
  emit('structured', { structured: where.structuredContent ?? null, text: text(where) });

  // An unknown tool is a JSON-RPC error or an isError result, never a hang.
  try {
    const r = await client.callTool({ name: 'no_such_tool', arguments: {} });
    emit('unknown', { isError: !!r.isError, text: text(r) });
  } catch (e) {
    emit('unknown', { error: String(e && e.message) });
  }
  // A call held for a person's approval: the request waits (this client
  // declares no elicitation) until the fleet's side decides.
  const approved = await client.callTool({ name: 'confirm_delete', arguments: { path: '/tmp/report.txt' } });
  emit('approved', { text: text(approved), isError: !!approved.isError });
  emit('done', {});
} finally {
  await client.close();
}
