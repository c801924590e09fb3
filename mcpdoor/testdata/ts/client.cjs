'use strict';
// A real MCP client against the door: @modelcontextprotocol/sdk's Client
// and StreamableHTTPClientTransport (the v1 line, protocol 2025-11-25).
// mcpdoor's TestTypeScriptClient runs it with Node 22 and NODE_PATH at
// the SDK's node_modules, reads the JSON lines it prints on stdout (one
// per event), and makes decisions on the fleet itself when told a call
// waits for approval.
//
//   DOOR_URL=http://127.0.0.1:PORT/mcp DOOR_TOKEN=… node client.cjs
//
// It exits 0 when every step got what it should, 1 otherwise (the reason
// on stderr).

const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');

const url = process.env.DOOR_URL;
const token = process.env.DOOR_TOKEN;
const approveTurn = process.env.APPROVE_TURN;

function emit(event, fields) {
  process.stdout.write(JSON.stringify({ event, ...fields }) + '\n');
}

function fail(msg) {
  process.stderr.write('client.cjs: ' + msg + '\n');
  process.exit(1);
}

function text(result) {
  return (result.content || [])
    .filter((c) => c.type === 'text')
    .map((c) => c.text)
    .join('\n');
}

// nextLine resolves with the next line of stdin.
const pending = [];
let buffered = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  buffered += chunk;
  let i;
  while ((i = buffered.indexOf('\n')) >= 0) {
    const line = buffered.slice(0, i);
    buffered = buffered.slice(i + 1);
    const next = pending.shift();
    if (next) next(line);
  }
});
function nextLine() {
  return new Promise((resolve) => pending.push(resolve));
}

async function main() {
  const client = new Client({ name: 'toolruntime-ts-test', version: '1.0.0' }, { capabilities: {} });
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: 'Bearer ' + token } },
  });
  await client.connect(transport);
  emit('connected', { protocolVersion: transport.protocolVersion || null, server: client.getServerVersion() });

  // tools/list: the principal's catalog.
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name);
  emit('tools', { names });
  for (const want of ['greet', 'slow_compute', 'confirm_delete', 'test_tool_with_progress']) {
    if (!names.includes(want)) fail(`tools/list has no ${want}: ${names.join(', ')}`);
  }
  const del = tools.find((t) => t.name === 'confirm_delete');
  emit('annotations', { confirm_delete: del.annotations || null });

  // tools/call: a plain call.
  const greet = await client.callTool({ name: 'greet', arguments: { name: 'Ada' } });
  emit('greet', { text: text(greet), isError: !!greet.isError });
  if (greet.isError || text(greet) !== 'Hello, Ada!') fail('greet: ' + JSON.stringify(greet));

  // Progress: notifications/progress from the call's activity.
  const progress = [];
  const withProgress = await client.callTool({ name: 'test_tool_with_progress', arguments: {} }, undefined, {
    onprogress: (p) => progress.push(p),
  });
  emit('progress', { progress, text: text(withProgress) });
  if (withProgress.isError) fail('test_tool_with_progress: ' + JSON.stringify(withProgress));

  // Approval: confirm_delete is held for a person (the principal's
  // approval scope); the request waits, with progress, until the test
  // decides on the fleet.
  const approvalProgress = [];
  const deleted = await client.callTool(
    {
      name: 'confirm_delete',
      arguments: { path: '/tmp/report.txt' },
      _meta: { 'io.agentbull.toolruntime/turn': approveTurn, 'io.agentbull.toolruntime/call': 'delete-1' },
    },
    undefined,
    {
      onprogress: (p) => {
        approvalProgress.push(p);
        emit('approval-progress', { message: p.message || '' });
      },
      timeout: 60000,
      resetTimeoutOnProgress: true,
    },
  );
  emit('approved', { text: text(deleted), isError: !!deleted.isError, progress: approvalProgress });
  if (deleted.isError || text(deleted) !== 'Deleted /tmp/report.txt') fail('confirm_delete: ' + JSON.stringify(deleted));

  // Cancel: the SDK's own way, an aborted request (notifications/cancelled),
  // once the call runs on a worker (its first progress notification).
  const ac = new AbortController();
  let started = false;
  const slow = client.callTool({ name: 'slow_compute', arguments: { seconds: 60, label: 'to cancel' } }, undefined, {
    signal: ac.signal,
    timeout: 150000,
    onprogress: () => {
      if (!started) {
        started = true;
        emit('slow-started', {});
        ac.abort('the test cancels it');
      }
    },
  });
  try {
    const r = await slow;
    fail('slow_compute was not cancelled: ' + JSON.stringify(r));
  } catch (e) {
    if (!started) fail('slow_compute failed before it started: ' + e);
    emit('cancelled', { error: String(e) });
  }
  // The test answers once it saw the call end on the workers, while this
  // client still holds the request's stream open: what ended the call was
  // the cancel notification, not a closed connection.
  const answer = await nextLine();
  if (answer !== 'ended') fail('the test did not see slow_compute end on the workers: ' + answer);

  // The door still serves this client after a cancel.
  const again = await client.callTool({ name: 'greet', arguments: { name: 'again' } });
  if (text(again) !== 'Hello, again!') fail('greet after the cancel: ' + JSON.stringify(again));

  await client.close();
  emit('done', {});
  process.exit(0);
}

main().catch((e) => fail(e && e.stack ? e.stack : String(e)));
