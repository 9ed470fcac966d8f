// A lean MCP client over Streamable HTTP for load benches: raw JSON-RPC on node's `http` with
// keep-alive, and nothing else (no schema validation, no standalone GET stream, no transport
// machinery), so that what a load measures is the server, not its clients. Each session is a real
// MCP session all the same: initialize, notifications/initialized, then tools/call with the
// session's mcp-session-id. Every answer is checked (HTTP status, the JSON-RPC id, no error, not
// isError), so a broken server cannot look fast.
import http from 'node:http';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';

/** One MCP session: a tool call resolves with its structuredContent, or throws naming what was wrong. */
export interface LeanSession {
  callTool(name: string, args: Record<string, unknown>): Promise<Record<string, any>>;
  /** Ends the session on the server (DELETE). */
  close(): Promise<void>;
}

/** Where and how to reach the server, and the keep-alive agent its sessions share. */
export interface LeanClientOpts {
  url: URL;
  token: string;
  agent: http.Agent;
}

interface Answer {
  status: number;
  sessionId: string | undefined;
  text: string;
}

function send(opts: LeanClientOpts, method: 'POST' | 'DELETE', message: unknown, headers: Record<string, string>): Promise<Answer> {
  return new Promise((done, fail) => {
    const req = http.request(
      opts.url,
      {
        method,
        agent: opts.agent,
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          authorization: `Bearer ${opts.token}`,
          ...headers,
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => {
          const id = res.headers['mcp-session-id'];
          done({ status: res.statusCode ?? 0, sessionId: typeof id === 'string' ? id : undefined, text });
        });
        res.on('error', fail);
      },
    );
    req.on('error', fail);
    req.end(message === undefined ? undefined : JSON.stringify(message));
  });
}
const post = (opts: LeanClientOpts, message: unknown, headers: Record<string, string>) => send(opts, 'POST', message, headers);

/** The JSON-RPC answer to request `id` in a body: plain JSON, or one of an event stream's `data:` lines. */
function answerTo(id: number, answer: Answer): { result?: any; error?: unknown } {
  if (answer.status !== 200) throw new Error(`HTTP ${answer.status} to request ${id}`);
  const bodies = answer.text.startsWith('{')
    ? [answer.text]
    : answer.text
        .split('\n')
        .filter((l) => l.startsWith('data: '))
        .map((l) => l.slice(6));
  for (const body of bodies) {
    const message = JSON.parse(body) as { id?: unknown; result?: unknown; error?: unknown };
    if (message.id === id) return message;
  }
  throw new Error(`no answer to request ${id}`);
}

/** Opens a session (initialize, notifications/initialized); throws when the server refuses it. */
export async function openLeanSession(opts: LeanClientOpts): Promise<LeanSession> {
  const init = await post(
    opts,
    {
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'lean-bench', version: '1' } },
    },
    {},
  );
  const initialized = answerTo(0, init);
  if (initialized.error || !init.sessionId) throw new Error('initialize failed');
  const headers = { 'mcp-session-id': init.sessionId, 'mcp-protocol-version': String(initialized.result.protocolVersion) };
  const notified = await post(opts, { jsonrpc: '2.0', method: 'notifications/initialized' }, headers);
  if (notified.status !== 202) throw new Error(`HTTP ${notified.status} to notifications/initialized`);
  let nextId = 1;
  return {
    async callTool(name, args) {
      const id = nextId++;
      const answer = answerTo(
        id,
        await post(opts, { jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } }, headers),
      );
      if (answer.error) throw new Error(`${name}: JSON-RPC error ${JSON.stringify(answer.error)}`);
      if (answer.result?.isError) throw new Error(`${name} failed: ${JSON.stringify(answer.result.content)}`);
      if (typeof answer.result?.structuredContent !== 'object') throw new Error(`${name}: no structuredContent`);
      return answer.result.structuredContent as Record<string, any>;
    },
    async close() {
      const closed = await send(opts, 'DELETE', undefined, headers);
      if (closed.status !== 200) throw new Error(`HTTP ${closed.status} to the session's DELETE`);
    },
  };
}
