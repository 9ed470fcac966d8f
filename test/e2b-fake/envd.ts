// envd, the in-sandbox daemon (E2B's envd.yaml, process.proto, filesystem.proto): Connect RPC with
// JSON for processes and the filesystem, REST /files for contents, /health. Requests name their
// sandbox with the E2b-Sandbox-Id header and carry its X-Access-Token. Like envd, a command's
// deadline (Connect-Timeout-Ms) and SendSignal signal only the process, never its group. A Start
// with `pty` runs on a real pseudo-terminal (node-pty, which the tests need anyway).
import { spawn, type ChildProcess } from 'node:child_process';
import {
  createReadStream,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readlinkSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
  type Stats,
} from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import path from 'node:path';
import { spawn as spawnPty, type IPty } from '@lydell/node-pty';
import { decodeEnvelope, openStream, RpcError, sendUnary, type RpcStream } from './connect-rpc.js';
import type { FakeState } from './control-plane.js';
import { sendApiError } from './control-plane.js';
import type { FakeSandbox } from './fake-sandbox.js';
import { writeBytes } from '../../host/providers/local/exec/terminal.js';

type Json = Record<string, any>;

function entryInfo(sb: FakeSandbox, hostP: string, st: Stats): Json {
  const type = st.isSymbolicLink()
    ? 'FILE_TYPE_SYMLINK'
    : st.isDirectory()
      ? 'FILE_TYPE_DIRECTORY'
      : st.isFile()
        ? 'FILE_TYPE_FILE'
        : 'FILE_TYPE_UNSPECIFIED';
  return {
    name: path.basename(hostP),
    type,
    path: sb.sandboxPath(hostP),
    size: String(st.size),
    mode: st.mode & 0o7777,
    permissions: (st.mode & 0o777).toString(8),
    owner: 'user',
    group: 'user',
    modifiedTime: st.mtime.toISOString(),
    ...(st.isSymbolicLink() ? { symlinkTarget: readlinkSync(hostP) } : {}),
  };
}

function statOrNotFound(hostP: string): Stats {
  try {
    return lstatSync(hostP);
  } catch {
    throw new RpcError('not_found', `path not found: ${hostP}`);
  }
}

function listDir(sb: FakeSandbox, dir: string, depth: number, out: Json[]): void {
  for (const name of readdirSync(dir).sort()) {
    const p = path.join(dir, name);
    const st = lstatSync(p);
    out.push(entryInfo(sb, p, st));
    if (st.isDirectory() && depth > 1) listDir(sb, p, depth - 1, out);
  }
}

/** Unary filesystem RPCs. */
function filesystemRpc(sb: FakeSandbox, method: string, req: Json): Json {
  const hostP = sb.hostPath(String(req.path ?? ''));
  switch (method) {
    case 'Stat':
      return { entry: entryInfo(sb, hostP, statOrNotFound(hostP)) };
    case 'MakeDir':
      if (existsSync(hostP)) throw new RpcError('already_exists', 'directory exists');
      mkdirSync(hostP, { recursive: true });
      return { entry: entryInfo(sb, hostP, lstatSync(hostP)) };
    case 'ListDir': {
      const st = statOrNotFound(hostP);
      if (!st.isDirectory()) throw new RpcError('invalid_argument', 'not a directory');
      const out: Json[] = [];
      listDir(sb, hostP, Math.max(1, Number(req.depth ?? 1)), out);
      return { entries: out };
    }
    case 'Remove':
      statOrNotFound(hostP);
      rmSync(hostP, { recursive: true, force: true });
      return {};
    case 'Move': {
      const src = sb.hostPath(String(req.source ?? ''));
      const dst = sb.hostPath(String(req.destination ?? ''));
      statOrNotFound(src);
      mkdirSync(path.dirname(dst), { recursive: true });
      renameSync(src, dst);
      return { entry: entryInfo(sb, dst, lstatSync(dst)) };
    }
    default:
      throw new RpcError('unimplemented', 'not implemented by the fake');
  }
}

function pidOf(req: Json): number {
  const pid = Number(req.process?.pid);
  if (!Number.isInteger(pid)) throw new RpcError('invalid_argument', 'pid selector required');
  return pid;
}

function child(sb: FakeSandbox, pid: number): ChildProcess {
  const c = sb.processes.get(pid);
  if (!c) throw new RpcError('not_found', `process ${pid} not found`);
  return c;
}

function terminal(sb: FakeSandbox, pid: number): IPty {
  const t = sb.terminals.get(pid);
  if (!t) throw new RpcError('not_found', `process ${pid} not found`);
  return t;
}

/** Unary process RPCs. */
function processRpc(sb: FakeSandbox, method: string, req: Json): Json {
  switch (method) {
    case 'List':
      return {
        processes: [...sb.processes.entries()].map(([pid, c]) => ({
          pid,
          config: { cmd: c.spawnfile, args: c.spawnargs.slice(1), envs: {} },
        })),
      };
    case 'SendInput':
      if (req.input?.pty !== undefined) writeBytes(terminal(sb, pidOf(req)), Buffer.from(String(req.input.pty), 'base64'));
      else child(sb, pidOf(req)).stdin?.write(Buffer.from(String(req.input?.stdin ?? ''), 'base64'));
      return {};
    case 'Update': {
      const size = req.pty?.size;
      if (size) terminal(sb, pidOf(req)).resize(Number(size.cols), Number(size.rows));
      return {};
    }
    case 'CloseStdin':
      child(sb, pidOf(req)).stdin?.end();
      return {};
    case 'SendSignal': {
      const sig = req.signal === 'SIGNAL_SIGTERM' || req.signal === 15 ? 'SIGTERM' : 'SIGKILL';
      const pid = pidOf(req);
      if (sb.terminals.has(pid)) terminal(sb, pid).kill(sig);
      else child(sb, pid).kill(sig);
      return {};
    }
    default:
      throw new RpcError('unimplemented', 'not implemented by the fake');
  }
}

/**
 * Start with `pty`: the process runs on a real pseudo-terminal (node-pty), its output streams as
 * `pty` data, SendInput's `pty` bytes are typed into it and Update resizes it — as envd does.
 */
function startTerminal(sb: FakeSandbox, cfg: Json, size: Json, cwd: string, stream: RpcStream): void {
  let t: IPty;
  try {
    t = spawnPty(String(cfg.cmd), (cfg.args ?? []).map(String), {
      cwd,
      env: sb.processEnv(cfg.envs ?? {}),
      cols: Number(size.cols ?? 80),
      rows: Number(size.rows ?? 24),
      encoding: null,
    });
  } catch {
    stream.end(new RpcError('internal', 'spawn failed'));
    return;
  }
  const pid = t.pid;
  sb.terminals.set(pid, t);
  stream.send({ event: { start: { pid } } });
  t.onData((d) => stream.send({ event: { data: { pty: Buffer.from(d).toString('base64') } } }));
  t.onExit(({ exitCode, signal }) => {
    sb.terminals.delete(pid);
    const end = signal
      ? { exitCode: -1, exited: false, status: `signal: ${signal}` }
      : { exitCode, exited: true, status: `exit status ${exitCode}` };
    stream.send({ event: { end } });
    stream.end();
  });
}

/** process.Process/Start: runs a real process and streams its events. */
function startProcess(sb: FakeSandbox, req: Json, inReq: IncomingMessage, res: ServerResponse): void {
  const cfg = req.process ?? {};
  const cwd = sb.hostPath(typeof cfg.cwd === 'string' && cfg.cwd !== '' ? cfg.cwd : '/home/user');
  const stream = openStream(res);
  // A streaming call's errors travel in the end-of-stream frame (HTTP 200), as envd sends them.
  if (!existsSync(cwd) || !statSync(cwd).isDirectory()) {
    stream.end(new RpcError('invalid_argument', `cwd ${cwd} does not exist`));
    return;
  }
  if (req.pty) return startTerminal(sb, cfg, req.pty.size ?? {}, cwd, stream);
  const c = spawn(String(cfg.cmd), (cfg.args ?? []).map(String), {
    cwd,
    env: sb.processEnv(cfg.envs ?? {}),
    stdio: [req.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'],
  });
  c.stdin?.on('error', () => {});
  const pid = c.pid;
  if (pid === undefined) {
    stream.end(new RpcError('internal', 'spawn failed'));
    return;
  }
  sb.processes.set(pid, c);
  stream.send({ event: { start: { pid } } });
  c.stdout!.on('data', (d: Buffer) => stream.send({ event: { data: { stdout: d.toString('base64') } } }));
  c.stderr!.on('data', (d: Buffer) => stream.send({ event: { data: { stderr: d.toString('base64') } } }));
  const timeoutMs = Number(inReq.headers['connect-timeout-ms'] ?? 0);
  const deadline =
    timeoutMs > 0
      ? setTimeout(() => {
          c.kill('SIGKILL');
          stream.end(new RpcError('deadline_exceeded', 'deadline exceeded'));
        }, timeoutMs)
      : undefined;
  const pingS = Number(inReq.headers['keepalive-ping-interval'] ?? 0);
  const ping = pingS > 0 ? setInterval(() => stream.send({ event: { keepalive: {} } }), pingS * 1000) : undefined;
  c.on('close', (code, signal) => {
    sb.processes.delete(pid);
    if (deadline) clearTimeout(deadline);
    if (ping) clearInterval(ping);
    const end =
      code !== null
        ? { exitCode: code, exited: true, status: `exit status ${code}` }
        : { exitCode: -1, exited: false, status: `signal: ${signal}` };
    stream.send({ event: { end } });
    stream.end();
  });
}

async function uploadFile(sb: FakeSandbox, url: URL, req: IncomingMessage, body: Buffer, res: ServerResponse): Promise<void> {
  const files: Array<{ path: string; data: Buffer }> = [];
  const target = url.searchParams.get('path') ?? '';
  if (String(req.headers['content-type'] ?? '').startsWith('multipart/form-data')) {
    const form = await new Request('http://fake/', {
      method: 'POST',
      headers: { 'content-type': String(req.headers['content-type']) },
      body,
    }).formData();
    for (const v of form.getAll('file')) {
      if (typeof v === 'string') continue;
      files.push({ path: target || v.name, data: Buffer.from(await v.arrayBuffer()) });
    }
  } else {
    files.push({ path: target, data: body });
  }
  const out: Json[] = [];
  for (const f of files) {
    if (!f.path) {
      sendApiError(res, 400, 'path required');
      return;
    }
    const hostP = sb.hostPath(f.path);
    mkdirSync(path.dirname(hostP), { recursive: true });
    writeFileSync(hostP, f.data);
    out.push({ path: sb.sandboxPath(hostP), name: path.basename(hostP), type: 'file' });
  }
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify(out));
}

function downloadFile(sb: FakeSandbox, url: URL, res: ServerResponse): void {
  const hostP = sb.hostPath(url.searchParams.get('path') ?? '');
  let st: Stats;
  try {
    st = statSync(hostP);
  } catch {
    sendApiError(res, 404, `file ${hostP} not found`);
    return;
  }
  if (st.isDirectory()) {
    sendApiError(res, 400, `path ${hostP} is a directory`);
    return;
  }
  res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(st.size) });
  createReadStream(hostP).pipe(res);
}

/** Handles one envd request; the caller has already read `body`. */
export async function handleEnvd(state: FakeState, req: IncomingMessage, url: URL, body: Buffer, res: ServerResponse): Promise<void> {
  const id = String(req.headers['e2b-sandbox-id'] ?? '');
  const sb = state.sandboxes.get(id);
  if (url.pathname === '/health') {
    res.writeHead(sb && sb.state === 'running' ? 204 : 502).end();
    return;
  }
  // What E2B's edge proxy answers for a sandbox that is gone (or paused).
  if (!sb || sb.state !== 'running') {
    sendApiError(res, 502, `sandbox ${id} not found`);
    return;
  }
  if (req.headers['x-access-token'] !== sb.accessToken) {
    if (url.pathname.startsWith('/files')) sendApiError(res, 401, 'invalid access token');
    else sendUnary(res, new RpcError('unauthenticated', 'invalid access token'));
    return;
  }
  if (url.pathname === '/files') {
    if (req.method === 'GET') downloadFile(sb, url, res);
    else await uploadFile(sb, url, req, body, res);
    return;
  }
  const m = /^\/(process\.Process|filesystem\.Filesystem)\/(\w+)$/.exec(url.pathname);
  if (!m) {
    sendApiError(res, 404, 'no such route');
    return;
  }
  const streaming = String(req.headers['content-type'] ?? '').startsWith('application/connect+json');
  try {
    const message = (streaming ? decodeEnvelope(body) : JSON.parse(body.toString('utf8') || '{}')) as Json;
    if (m[1] === 'process.Process' && m[2] === 'Start') return startProcess(sb, message, req, res);
    if (streaming) throw new RpcError('unimplemented', 'streaming method not implemented by the fake');
    sendUnary(res, m[1] === 'process.Process' ? processRpc(sb, m[2]!, message) : filesystemRpc(sb, m[2]!, message));
  } catch (e) {
    sendUnary(res, e instanceof RpcError ? e : new RpcError('internal', 'fake envd failure'));
  }
}
