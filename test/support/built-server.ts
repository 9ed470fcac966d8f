// Drives the BUILT server (dist/host.js) with the SDK's real Client, over stdio or HTTP.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect } from 'vitest';
import { HOST_JS } from './paths.js';
import { requireSandboxes } from './prerequisites.js';
import { hostJsReadableBy } from './readable-build.js';
import { isRunning, startTimeOf } from './processes.js';
import { destroyStateDir, tempStateDir } from './state-dir.js';
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
 * can read, in `/`. `hostJs` runs another build's server (an older revision's, say); `node`, another
 * node binary (the server's process.execPath).
 */
export async function connectStdio(
  env: Record<string, string>,
  args: string[] = [],
  as?: { uid: number; gid: number },
  hostJs: string = HOST_JS,
  node: string = process.execPath,
): Promise<StdioServer> {
  const server = [as ? hostJsReadableBy(as) : hostJs, ...args];
  // prettier-ignore
  const launch = as
    ? { command: 'setpriv', args: ['--reuid', String(as.uid), '--regid', String(as.gid), '--clear-groups', '--', node, ...server], cwd: '/' }
    : { command: node, args: server };
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

/** One e2e file's stdio servers over a private state directory (its local sandboxes). */
export interface LocalServers {
  readonly stateDir: string;
  /** Starts a server on the file's state directory, `env` over it and `args` after host.js; closed in afterAll if still running. */
  connect(env?: Record<string, string>, args?: string[]): Promise<StdioServer>;
}

/**
 * Registers the hooks of a file whose servers share one state directory: bubblewrap and the build
 * are required in beforeAll (a failure, never a skip); afterAll closes the servers still running
 * (one a test killed is not waited for) and destroys every sandbox left with the directory.
 */
export function localServers(): LocalServers {
  const stateDir = tempStateDir();
  const open: StdioServer[] = [];
  beforeAll(() => requireSandboxes());
  afterAll(async () => {
    await Promise.allSettled(open.map((o) => (o.transport.pid && isRunning(o.transport.pid) ? o.close() : undefined)));
    await destroyStateDir(stateDir);
  });
  return {
    stateDir,
    async connect(env = {}, args = []) {
      const server = await connectStdio({ SANDBOX_MCP_STATE_DIR: stateDir, ...env }, args);
      open.push(server);
      return server;
    },
  };
}

/** The one server of a file whose tests all talk to it (see localServer). */
export interface LocalServer {
  readonly stateDir: string;
  /** The server's client: set in beforeAll. */
  readonly client: Client;
  /** Everything the server wrote to stderr so far. */
  stderr(): string;
}

/**
 * Registers the hooks of a file whose tests share one server (as localServers does), started in
 * beforeAll once `prepare` has set up its state directory (templates, say).
 */
export function localServer(opts: { prepare?: (stateDir: string) => void | Promise<void> } = {}): LocalServer {
  const servers = localServers();
  let server: StdioServer | undefined;
  beforeAll(async () => {
    await opts.prepare?.(servers.stateDir);
    server = await servers.connect();
  });
  const started = (): StdioServer => {
    if (!server) throw new Error("the file's server starts in beforeAll");
    return server;
  };
  return {
    stateDir: servers.stateDir,
    get client() {
      return started().client;
    },
    stderr: () => started().stderr(),
  };
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
