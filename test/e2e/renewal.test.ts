// Lifetime renewal against real local sandboxes, through two sessions of the built HTTP server:
// command and file tools renew a sandbox the session created to the session's renewal duration
// (the create timeout, then the last set_sandbox_timeout); task tools never extend a lifetime;
// another session's tools never renew a sandbox they address by explicit id.
//
// No waiting: the other session first cuts the sandbox's lifetime to SHORT_S with an explicit
// set_sandbox_timeout (which renews nothing of the owner's), so a renewal shows as a jump of
// end_at from minutes to about an hour ahead, and its absence as an end_at that did not change.
// A renewal never shortens: after the other session lengthens the lifetime beyond the renewal,
// the owner's tools leave it as it is.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { readKeeperRecord } from '../../host/providers/local/sandbox/state-dir.js';
import { type HttpServer, ok, startHttp } from '../support/built-server.js';
import { isRootOrSkipping, requireCommands, requireSandboxes } from '../support/prerequisites.js';
import { destroyStateDir, tempStateDir } from '../support/state-dir.js';
import { waitFor } from '../support/wait.js';

/** The owner's create timeout: what its command and file tools renew to. */
const RENEW_S = 3600;
/** What the other session cuts the lifetime to: far below any renewal. */
const SHORT_S = 120;

const stateDir = tempStateDir();
let server: HttpServer;
let owner: Client;
let other: Client;

beforeAll(async () => {
  requireSandboxes();
  server = await startHttp({ SANDBOX_MCP_STATE_DIR: stateDir });
  owner = (await server.connect()).client;
  other = (await server.connect()).client;
});
afterAll(async () => {
  await server?.stop();
  await destroyStateDir(stateDir);
});

/** A sandbox the owner session created (so it owns it), with a file to read. */
async function ownedSandbox(timeout = RENEW_S): Promise<string> {
  const id = (await ok(owner, 'create_sandbox', { timeout })).sandbox_id as string;
  await ok(owner, 'write_file', { sandbox_id: id, path: 'data.txt', content: 'data\n' });
  return id;
}

/** The sandbox's end_at in epoch milliseconds, read through get_sandbox (which never extends). */
async function endAt(sandboxId: string): Promise<number> {
  return Date.parse((await ok(other, 'get_sandbox', { sandbox_id: sandboxId })).end_at as string);
}

/** Cuts the lifetime to SHORT_S from the other session; returns the new end_at. */
async function shorten(sandboxId: string): Promise<number> {
  await ok(other, 'set_sandbox_timeout', { sandbox_id: sandboxId, timeout: SHORT_S });
  const end = await endAt(sandboxId);
  expect(end - Date.now()).toBeLessThanOrEqual(SHORT_S * 1000);
  return end;
}

/** Every command and file tool, with arguments that succeed on a sandbox from ownedSandbox(). */
function commandAndFileCalls(sandboxId: string): [string, Record<string, unknown>][] {
  const on = { sandbox_id: sandboxId };
  return [
    ['run_command', { ...on, command: 'true' }],
    ['run_code', { ...on, code: 'pass' }],
    ['read_file', { ...on, path: 'data.txt' }],
    ['write_file', { ...on, path: 'written.txt', content: 'x' }],
    ['list_files', { ...on, path: '.' }],
    ['upload_file', { ...on, path: 'up.bin', data_base64: Buffer.from('up').toString('base64') }],
    ['download_file', { ...on, path: 'data.txt' }],
  ];
}

describe('lifetime renewal (local sandboxes)', () => {
  it('run_command, run_code and every file tool renew a session-owned sandbox to its create timeout', async () => {
    const sandbox = await ownedSandbox();
    for (const [tool, args] of commandAndFileCalls(sandbox)) {
      await shorten(sandbox);
      await ok(owner, tool, args);
      const leftS = ((await endAt(sandbox)) - Date.now()) / 1000;
      expect(leftS, `${tool} renews`).toBeGreaterThan(RENEW_S - 600);
      expect(leftS, `${tool} renews`).toBeLessThanOrEqual(RENEW_S);
    }
    // Through the session default as well as by explicit id.
    await shorten(sandbox);
    await ok(owner, 'run_command', { command: 'true' });
    expect((await endAt(sandbox)) - Date.now()).toBeGreaterThan((RENEW_S - 600) * 1000);
  });

  it("renews with the owner's last successful set_sandbox_timeout once there is one", async () => {
    const sandbox = await ownedSandbox();
    await ok(owner, 'set_sandbox_timeout', { sandbox_id: sandbox, timeout: 1800 });
    await shorten(sandbox);
    await ok(owner, 'run_command', { sandbox_id: sandbox, command: 'true' });
    const leftS = ((await endAt(sandbox)) - Date.now()) / 1000;
    expect(leftS).toBeGreaterThan(1800 - 600);
    expect(leftS).toBeLessThanOrEqual(1800);
  });

  it('never shortens a lifetime that already ends later than the renewal would set (only set_sandbox_timeout may)', async () => {
    const sandbox = await ownedSandbox();
    await ok(other, 'set_sandbox_timeout', { sandbox_id: sandbox, timeout: 4 * RENEW_S });
    const end = await endAt(sandbox);
    for (const [tool, args] of commandAndFileCalls(sandbox)) {
      await ok(owner, tool, args);
      expect(await endAt(sandbox), `${tool} leaves the longer lifetime`).toBe(end);
    }
    await ok(owner, 'set_sandbox_timeout', { sandbox_id: sandbox, timeout: 1800 });
    expect((await endAt(sandbox)) - Date.now()).toBeLessThanOrEqual(1800 * 1000);
  });

  it('start_task, get_task and cancel_task leave end_at unchanged', async () => {
    const sandbox = await ownedSandbox();
    const end = await shorten(sandbox);
    const task = await ok(owner, 'start_task', { sandbox_id: sandbox, command: 'echo ready; sleep 600' });
    expect(await endAt(sandbox)).toBe(end);
    await ok(owner, 'get_task', { sandbox_id: sandbox, task_id: task.task_id, wait: 1 });
    expect(await endAt(sandbox)).toBe(end);
    await ok(owner, 'cancel_task', { sandbox_id: sandbox, task_id: task.task_id });
    expect(await endAt(sandbox)).toBe(end);
  });

  // strace attaches to the server, which is not its child: root may (a user only where ptrace_scope is 0).
  it.skipIf(!isRootOrSkipping('attaching strace to the server'))(
    'a run_command on an owned sandbox looks at it in /proc once: its renewal reads the deadline alone',
    async () => {
      requireCommands(['strace']);
      const sandbox = await ownedSandbox();
      await ok(owner, 'run_command', { sandbox_id: sandbox, command: 'true' });
      const keeper = readKeeperRecord(join(stateDir, 'local', sandbox.replace(/^local:/, '')))!.keeper.pid;
      const trace = join(stateDir, 'openat.trace');
      const tracer = spawn('strace', ['-f', '-e', 'trace=openat', '-o', trace, '-p', String(server.process.pid)], { stdio: 'ignore' });
      const exited = new Promise((resolve) => tracer.once('exit', resolve));
      try {
        // Attached once a call's opens show up: a look for a sandbox that does not exist opens its records, no /proc.
        await waitFor(async () => {
          await other.callTool({ name: 'get_sandbox', arguments: { sandbox_id: 'local:nosuchsandbx' } });
          return existsSync(trace) && readFileSync(trace, 'utf8').includes('nosuchsandbx');
        }, 'strace to attach');
        const from = readFileSync(trace, 'utf8').length;
        const calls = 5;
        for (let i = 0; i < calls; i++) await ok(owner, 'run_command', { sandbox_id: sandbox, command: 'true' });
        tracer.kill('SIGINT');
        await exited;
        const reads = readFileSync(trace, 'utf8')
          .slice(from)
          .split('\n')
          .filter((l) => l.includes(`"/proc/${keeper}/stat"`));
        // The exec's look; the renewal (within its slack here) asks lifetimeEnd, a stat of the deadline.
        expect(reads).toHaveLength(calls);
      } finally {
        tracer.kill('SIGINT');
        await exited;
      }
    },
  );

  it("another session's command and file tools never renew a sandbox they address by explicit id", async () => {
    const sandbox = await ownedSandbox();
    const end = await shorten(sandbox);
    for (const [tool, args] of commandAndFileCalls(sandbox)) {
      await ok(other, tool, args);
      expect(await endAt(sandbox), `${tool} from another session`).toBe(end);
    }
  });
});
