// Drives the BUILT server (dist/host.js) with the SDK's real Client, over stdio or HTTP.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import { HOST_JS } from './paths.js';
import { hostJsReadableBy } from './readable-build.js';
import { isRunning, startTimeOf } from './processes.js';
import { waitFor } from './wait.js';

/** A clean environment for the server: no NODE_EXTRA_CA_CERTS, only what the test sets. */
export function serverEnv(extra: Record<string, string> = {}): Record<string, string> {
  return { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/root', ...extra };
}

export interface StdioServer {
  client: Client;
  transport: StdioClientTransport;
  /** Everything the server wrote to stderr so far (its log). */
  stderr(): string;
  /** Closes stdin (EOF) and waits for the server process to exit. */
  close(): Promise<void>;
}

/**
 * Spawns the built server over stdio and connects a real MCP client. With `as` the server runs as
 * that user (through setpriv, which execs it: the pid stays the server's), from a build that user
 * can read, in `/`. `hostJs` runs another build's server (an older revision's, say).
 */
export async function connectStdio(
  env: Record<string, string>,
  args: string[] = [],
  as?: { uid: number; gid: number },
  hostJs: string = HOST_JS,
): Promise<StdioServer> {
  const server = [as ? hostJsReadableBy(as) : hostJs, ...args];
  // prettier-ignore
  const launch = as
    ? { command: 'setpriv', args: ['--reuid', String(as.uid), '--regid', String(as.gid), '--clear-groups', '--', process.execPath, ...server], cwd: '/' }
    : { command: process.execPath, args: server };
  const transport = new StdioClientTransport({ ...launch, env: serverEnv(env), stderr: 'pipe' });
  let log = '';
  transport.stderr?.on('data', (d: Buffer) => (log += d.toString('utf8')));
  const client = new Client({ name: 'e2e', version: '1.0.0' });
  await client.connect(transport);
  // The server is its pid and start time: close waits for this process to exit, never for one that
  // took the pid over after a test killed the server long before.
  const pid = transport.pid;
  const startTime = pid ? startTimeOrNull(pid) : null;
  return {
    client,
    transport,
    stderr: () => log,
    async close() {
      await client.close();
      if (pid) await waitFor(() => !isRunning(pid) || startTimeOrNull(pid) !== startTime, 'the server process to exit');
    },
  };
}

function startTimeOrNull(pid: number): number | null {
  try {
    return startTimeOf(pid);
  } catch {
    return null;
  }
}

export interface HttpServer {
  url: URL;
  token: string;
  process: ChildProcess;
  /** Connects a new MCP session (its own client). */
  connect(headers?: Record<string, string>): Promise<{ client: Client; transport: StreamableHTTPClientTransport }>;
  stop(): Promise<void>;
}

/**
/**
 * Starts `sandbox-mcp http` on a free loopback port (as `as`, when given) and waits until it
 * listens. With a tokens file in `env` (SANDBOX_MCP_TOKENS_FILE) no plain token is set, and
 * `token` is empty; else the token is `env.SANDBOX_MCP_TOKEN` when given, or a fresh one.
 */
export async function startHttp(env: Record<string, string>, args: string[] = [], as?: { uid: number; gid: number }): Promise<HttpServer> {
  const token = env.SANDBOX_MCP_TOKENS_FILE ? '' : (env.SANDBOX_MCP_TOKEN ?? 'test-token-' + randomBytes(12).toString('hex'));
  const child = spawn(process.execPath, [as ? hostJsReadableBy(as) : HOST_JS, 'http', '--port', '0', ...args], {
    env: serverEnv({ ...env, ...(token ? { SANDBOX_MCP_TOKEN: token } : {}) }),
    stdio: ['ignore', 'ignore', 'pipe'],
    ...(as ?? {}),
  });
  const url = await new Promise<URL>((resolveUrl, reject) => {
    let buf = '';
    child.stderr!.on('data', (d: Buffer) => {
      buf += d.toString();
      const m = /listening on (http:\/\/\S+)/.exec(buf);
      if (m) resolveUrl(new URL(m[1]!));
    });
    child.once('exit', () => reject(new Error(`http server exited before listening: ${buf.trim().slice(-2000)}`)));
  });
  return {
    url,
    token,
    process: child,
    async connect(headers = { authorization: `Bearer ${token}` }) {
      const transport = new StreamableHTTPClientTransport(url, { requestInit: { headers } });
      const client = new Client({ name: 'e2e-http', version: '1.0.0' });
      await client.connect(transport);
      return { client, transport };
    },
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** Calls a tool and returns its structured result, failing the test on a tool error. */
export async function ok<T = Record<string, any>>(client: Client, name: string, args: Record<string, unknown> = {}): Promise<T> {
  const r = (await client.callTool({ name, arguments: args })) as CallToolResult;
  if (r.isError) throw new Error(`${name} failed: ${JSON.stringify(r.content)}`);
  expect(r.structuredContent).toBeDefined();
  return r.structuredContent as T;
}

/** The error object of a tool call that must fail: {category, suggestion, status?, code?} plus the raw text. */
export async function toolError(
  client: Client,
  name: string,
  args: Record<string, unknown> = {},
): Promise<{ category: string; suggestion: string; code?: string; text: string }> {
  const r = (await client.callTool({ name, arguments: args })) as CallToolResult;
  expect(r.isError, `${name} should fail`).toBe(true);
  const text = (r.content[0] as { text: string }).text;
  return { ...(JSON.parse(text) as { error: { category: string; suggestion: string; code?: string } }).error, text };
}
