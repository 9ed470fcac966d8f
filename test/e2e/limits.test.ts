// Safe by default: a local sandbox can exhaust only itself. The built server runs as root and as
// an unprivileged user (nobody, with its own state directory), each with small limits, and a
// real MCP client drives it. Every exhaustion here is bounded: at most twice the limit under
// test, so a broken limit costs the machine little.
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { chownSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { hasSysResource } from '../../host/providers/local/limits/layers.js';
import { cleanupLimitFor, processLimitFor } from '../../host/providers/local/limits/process-tiers.js';
import { readKeeperRecord } from '../../host/providers/local/sandbox/state-dir.js';
import { ok, startHttp, toolError, type HttpServer } from '../support/built-server.js';
import { cgroupSituation } from '../support/cgroup-situation.js';
import { isRootOrSkipping, requireSandboxes } from '../support/prerequisites.js';
import { waitFor } from '../support/wait.js';

const PROCESSES = 256;
const DISK_MB = 64;
const MEMORY_MB = 128;
const MIB = 1024 * 1024;
const NOBODY = 65534;

/** The OOM score adjustment this test process (and so the server it starts) has. */
const ownOomScoreAdj = Number(readFileSync('/proc/self/oom_score_adj', 'utf8').trim());

// Starts 2 × the process limit of sleepers from python (bash would retry failed forks), counts
// them, then holds them until /tmp/release exists (at most 60 s), with "drop" ends them, or with
// "leave" exits (1 if a fork failed, as a program that met the limit would) and leaves them behind
// (for 120 s at most; their output goes nowhere).
const SPAWN_PY = `
import errno, os, subprocess, sys, time
n, mode = int(sys.argv[1]), sys.argv[2]
ok = eagain = 0
procs = []
for _ in range(n):
    try:
        procs.append(subprocess.Popen(['sleep', '120'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)); ok += 1
    except OSError as e:
        if e.errno != errno.EAGAIN: raise
        eagain += 1
print(f'ok={ok} eagain={eagain}', flush=True)
deadline = time.time() + 60
while mode == 'hold' and not os.path.exists('/tmp/release') and time.time() < deadline:
    time.sleep(0.05)
if mode == 'leave': os._exit(1 if eagain else 0)
for p in procs: p.kill()
for p in procs: p.wait()
`;

// Makes SysV shared memory segments of argv[1] bytes until argv[2] bytes are made or shmget
// fails, then tries one of argv[3] bytes; writes into the first (real pages) and exits attached.
const SHM_PY = `
import ctypes, errno, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
seg, total, big = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
def make(size):
    i = libc.shmget(0, ctypes.c_size_t(size), 0o1600)
    return i, (None if i >= 0 else errno.errorcode[ctypes.get_errno()])
ids, made, err = [], 0, None
while made < total:
    i, err = make(seg)
    if err: break
    ids.append(i); made += seg
print(f'made={made} err={err} big={make(big)[1]}', flush=True)
if ids:
    ctypes.memset(libc.shmat(ids[0], None, 0), 1, seg)
`;

function counts(text: string): { ok: number; eagain: number } {
  const m = /ok=(\d+) eagain=(\d+)/.exec(text);
  if (!m) throw new Error('no counts in the output');
  return { ok: Number(m[1]), eagain: Number(m[2]) };
}

/** Host processes (threads included) in the sandbox's pid namespace, counted from the host's /proc. */
function tasksInSandbox(stateDir: string, sandboxId: string): number {
  const rec = readKeeperRecord(join(stateDir, 'local', sandboxId.replace(/^local:/, '')));
  if (!rec) throw new Error('no keeper record');
  const ns = readlinkSync(`/proc/${rec.pid1.pid}/ns/pid`);
  let n = 0;
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (readlinkSync(`/proc/${name}/ns/pid`) === ns) n += readdirSync(`/proc/${name}/task`).length;
    } catch {
      // Exited meanwhile.
    }
  }
  return n;
}

async function call(client: Client, name: string, args: Record<string, unknown>): Promise<CallToolResult> {
  return (await client.callTool({ name, arguments: args })) as CallToolResult;
}

/** The note texts (content beyond the JSON) of a tool result. */
function notesOf(r: CallToolResult): string {
  return r.content
    .slice(1)
    .map((c) => (c as { text?: string }).text ?? '')
    .join('\n');
}

beforeAll(() => requireSandboxes());

const users = [
  { name: 'root', as: undefined },
  { name: 'an unprivileged user (nobody)', as: { uid: NOBODY, gid: NOBODY } },
] as const;
// Starting a server as another user, and the root half itself, need root.
const asRoot = isRootOrSkipping('the resource-limit tests (a server as root and as nobody)');

describe.skipIf(!asRoot).each(users)('resource limits, server running as $name', ({ as }) => {
  const stateDir = mkdtempSync(join(tmpdir(), 'sandbox-mcp-limits-'));
  if (as) chownSync(stateDir, as.uid, as.gid);
  const isRoot = as === undefined;
  // What cgroups a server running as this user can make here (root on cgroup v1 on the test machine);
  // the tests that depend on it carry the situation in their titles.
  const situation = cgroupSituation(as);
  const hasCgroups = situation.controllers.memory && situation.controllers.pids;
  let server: HttpServer;
  let client: Client;

  beforeAll(async () => {
    server = await startHttp(
      {
        SANDBOX_MCP_STATE_DIR: stateDir,
        SANDBOX_MCP_SANDBOX_PROCESSES: String(PROCESSES),
        SANDBOX_MCP_SANDBOX_DISK: String(DISK_MB),
        SANDBOX_MCP_MAX_SANDBOXES: '3',
        SANDBOX_MCP_MAX_WAITING_GETS: '1',
      },
      [],
      as,
    );
    client = (await server.connect()).client;
  });

  // Each test starts with no sandbox, whatever the one before left behind.
  afterEach(async () => {
    for (const sb of (await ok(client, 'list_sandboxes', {})).sandboxes as { sandbox_id: string }[]) {
      await call(client, 'kill_sandbox', { sandbox_id: sb.sandbox_id });
    }
  });

  afterAll(async () => {
    await client.close();
    await server.stop();
    rmSync(stateDir, { recursive: true, force: true });
  });

  async function createSandbox(args: Record<string, unknown> = {}): Promise<string> {
    const meta = await ok(client, 'create_sandbox', { timeout: 300, ...args });
    await ok(client, 'write_file', { sandbox_id: meta.sandbox_id, path: 'spawn.py', content: SPAWN_PY });
    await ok(client, 'write_file', { sandbox_id: meta.sandbox_id, path: 'shm.py', content: SHM_PY });
    return meta.sandbox_id as string;
  }

  const run = (sandbox_id: string, command: string) => ok(client, 'run_command', { sandbox_id, command, timeout: 120 });

  /** Reads a task until it is no longer running (bounded), returning its last view. */
  async function finished(handle: { sandbox_id: string; task_id: string }): Promise<Record<string, any>> {
    let view = await ok(client, 'get_task', { ...handle, wait: 10 });
    await waitFor(
      async () => {
        if (view.state !== 'running') return true;
        view = await ok(client, 'get_task', { ...handle, wait: 10 });
        return view.state !== 'running';
      },
      'the task to end',
      90_000,
    );
    return view;
  }

  it(`${situation.name}: every entry (run_command, run_code, start_task) runs within the limits; get_sandbox reports what holds`, async () => {
    const id = await createSandbox();
    const meta = await ok(client, 'get_sandbox', { sandbox_id: id });
    expect(meta).toMatchObject({ cpu_count: null, memory_mb: hasCgroups ? expect.any(Number) : null, disk_size_mb: DISK_MB });
    const probe =
      'grep -E "^Max (processes|open files|core)" /proc/self/limits | tr -s " "; cat /proc/self/oom_score_adj; cat /proc/self/cgroup';
    const viaCommand = (await run(id, probe)).stdout as string;
    const viaCode = (await ok(client, 'run_code', { sandbox_id: id, language: 'bash', code: probe })).stdout as string;
    const task = await ok(client, 'start_task', { sandbox_id: id, command: probe });
    const viaTask = (await finished({ sandbox_id: id, task_id: task.task_id })).stdout as string;
    const expectBounds = (text: string, processes: number) => {
      expect(text).toContain(`Max processes ${processes} ${processes} processes`);
      expect(text).toContain('Max open files 4096 4096 files');
      expect(text).toContain('Max core file size 0 0 bytes');
      // The caller's commands and a task's command are the OOM killer's first choice (raised, never lowered).
      expect(text.split('\n')).toContain(String(Math.max(500, ownOomScoreAdj)));
      const inCgroup = text.includes(`sandbox-mcp-${id.replace(/^local:/, '')}`);
      expect(inCgroup).toBe(hasCgroups);
    };
    expectBounds(viaCommand, processLimitFor(PROCESSES, 'command'));
    expectBounds(viaCode, processLimitFor(PROCESSES, 'command'));
    expectBounds(viaTask, processLimitFor(PROCESSES, 'task'));
    // pid 1 and bwrap are exempt from the OOM killer where the keeper may lower a score (root with CAP_SYS_RESOURCE).
    const pid1Adj = (await run(id, 'cat /proc/1/oom_score_adj')).stdout.trim();
    // And pid 1 stays outside the sandbox's cgroups, so their OOM killer can never choose it.
    expect((await run(id, 'cat /proc/1/cgroup')).stdout).not.toContain('sandbox-mcp-');
    expect(pid1Adj).toBe(isRoot && hasSysResource() ? '-1000' : String(ownOomScoreAdj));
    await ok(client, 'kill_sandbox', { sandbox_id: id });
  });

  it('a runaway task gets EAGAIN at its limit; run_command, run_code, get_task, cancel_task and kill_sandbox still work', async () => {
    const id = await createSandbox();
    const other = await createSandbox();
    const before = tasksInSandbox(stateDir, id);
    const task = await ok(client, 'start_task', { sandbox_id: id, command: `python3 spawn.py ${2 * PROCESSES} hold`, timeout: 120 });
    const handle = { sandbox_id: id, task_id: task.task_id };
    let view = task;
    await waitFor(async () => {
      view = await ok(client, 'get_task', { ...handle, wait: 5 });
      return /ok=\d+/.test(view.stdout as string);
    }, 'the spawner to report');
    const spawned = counts(view.stdout as string);
    const taskLimit = processLimitFor(PROCESSES, 'task');
    expect(spawned.ok).toBeLessThanOrEqual(taskLimit);
    // The supervisor, the shell and python take the rest of the task's share.
    expect(spawned.ok).toBeGreaterThan(taskLimit - 32);
    expect(spawned.eagain).toBe(2 * PROCESSES - spawned.ok);
    // Nothing escaped: the host sees at most the limit in the sandbox (the helpers of our own calls included).
    expect(tasksInSandbox(stateDir, id) - before).toBeLessThanOrEqual(taskLimit + 8);

    // While the task holds its limit, the server's tools and the caller's commands still run.
    expect((await run(id, 'echo alive; ps -e | wc -l')).stdout).toMatch(/^alive\n\d+\n$/);
    expect((await ok(client, 'run_code', { sandbox_id: id, language: 'python', code: 'print(6 * 7)' })).stdout).toBe('42\n');
    expect((await ok(client, 'get_task', handle)).state).toBe('running');
    // A second task finds no room and is refused at once, saying why.
    const refused = await toolError(client, 'start_task', { sandbox_id: id, command: 'true' });
    expect(refused).toMatchObject({ category: 'insufficient_resources', code: 'process_limit' });
    expect(refused.suggestion).toMatch(/process limit/);
    // Another sandbox has a count of its own: the caller's commands get their whole share there.
    const elsewhere = counts((await run(other, `python3 spawn.py ${2 * PROCESSES} drop`)).stdout as string);
    const commandLimit = processLimitFor(PROCESSES, 'command');
    expect(elsewhere.ok).toBeLessThanOrEqual(commandLimit);
    expect(elsewhere.ok).toBeGreaterThan(commandLimit - 32);

    const cancelled = await ok(client, 'cancel_task', handle);
    expect(cancelled.state).toBe('cancelled');
    await waitFor(() => tasksInSandbox(stateDir, id) < before + 8, 'the sleepers to be gone');
    expect(counts((await run(id, `python3 spawn.py 16 drop`)).stdout as string)).toEqual({ ok: 16, eagain: 0 });
    await ok(client, 'kill_sandbox', { sandbox_id: id });
    await ok(client, 'kill_sandbox', { sandbox_id: other });
  });

  it('run_command and run_code that leave the sandbox at its process limit say so after stderr', async () => {
    const note = /\[sandbox-mcp\] The sandbox is at its process limit \(256 processes and threads\)/;
    const viaCommand = await createSandbox();
    const command = await run(viaCommand, `python3 spawn.py ${2 * PROCESSES} leave`);
    expect(command.exit_code).toBe(1);
    expect(counts(command.stdout as string).eagain).toBeGreaterThan(0);
    expect(command.stderr).toMatch(note);
    const viaCode = await createSandbox();
    const code = await ok(client, 'run_code', { sandbox_id: viaCode, language: 'bash', code: `python3 spawn.py ${2 * PROCESSES} leave` });
    expect(counts(code.stdout as string).eagain).toBeGreaterThan(0);
    expect(code.stderr).toMatch(note);
    // A command that fails below the limit gets no such line.
    const other = await createSandbox();
    expect(await run(other, `python3 spawn.py 16 drop; exit 1`)).toMatchObject({ exit_code: 1, stderr: '' });
  });

  it('leftovers of a finished run_command fill the process limit: run_command keeps a reserve to clean up, stop_processes ends them and keeps the tasks', async () => {
    const id = await createSandbox();
    const kept = await ok(client, 'start_task', { sandbox_id: id, command: 'echo up; sleep 300', timeout: 300 });
    const keptHandle = { sandbox_id: id, task_id: kept.task_id };
    // A command that returns, leaving sleepers behind until the commands' limit (bounded: twice the sandbox's limit, counted).
    // The fillers run with background_after 0: a call the resident may promote has a supervisor
    // beside it (and one booted ahead), which count while it runs and leave room behind when it ends.
    const fill = async (n: number) =>
      counts(
        (await ok(client, 'run_command', { sandbox_id: id, command: `python3 spawn.py ${n} leave`, timeout: 120, background_after: 0 }))
          .stdout as string,
      );
    const first = await fill(2 * PROCESSES);
    expect(first.eagain).toBeGreaterThan(0);
    expect(first.ok).toBeLessThanOrEqual(processLimitFor(PROCESSES, 'command'));
    // A task cannot start, and the refusal names a way out that works.
    const refusedTask = await toolError(client, 'start_task', { sandbox_id: id, command: 'true' });
    expect(refusedTask).toMatchObject({ category: 'insufficient_resources', code: 'process_limit' });
    expect(refusedTask.suggestion).toMatch(/run_command with kill or pkill.*stop_processes/);
    // run_command and run_code still run (on the reserve kept for cleaning up), and so do the task tools.
    expect((await run(id, 'echo still here')).stdout).toBe('still here\n');
    expect((await ok(client, 'run_code', { sandbox_id: id, language: 'python', code: 'print(6 * 7)' })).stdout).toBe('42\n');
    expect((await ok(client, 'get_task', keptHandle)).state).toBe('running');
    // Leftovers that fill the reserve too leave the commands nothing: the refusal names stop_processes.
    const second = await fill(PROCESSES);
    expect(second.ok).toBeLessThanOrEqual(cleanupLimitFor(PROCESSES) - processLimitFor(PROCESSES, 'command'));
    const refused = await toolError(client, 'run_command', { sandbox_id: id, command: 'true' });
    expect(refused).toMatchObject({ category: 'insufficient_resources', code: 'process_limit' });
    expect(refused.suggestion).toMatch(/^The sandbox is at its process limit .*: call stop_processes/);
    // The way out: everything but the task ends; the sandbox and its files stay.
    const stopped = await ok(client, 'stop_processes', { sandbox_id: id });
    expect(stopped.stopped).toBeGreaterThanOrEqual(first.ok + second.ok);
    expect(stopped.stopped).toBeLessThanOrEqual(first.ok + second.ok + 8);
    expect((await ok(client, 'get_task', keptHandle)).state).toBe('running');
    expect(counts((await run(id, `python3 spawn.py 16 drop`)).stdout as string)).toEqual({ ok: 16, eagain: 0 });
    expect((await ok(client, 'read_file', { sandbox_id: id, path: 'spawn.py' })).content).toBe(SPAWN_PY);
    const task = await ok(client, 'start_task', { sandbox_id: id, command: 'echo again' });
    expect((await finished({ sandbox_id: id, task_id: task.task_id })).stdout).toBe('again\n');
    // Nothing left to stop but the task.
    expect((await ok(client, 'stop_processes', { sandbox_id: id })).stopped).toBe(0);
    expect((await ok(client, 'get_task', keptHandle)).state).toBe('running');
    await ok(client, 'kill_sandbox', { sandbox_id: id });
  });

  it('a writer gets ENOSPC at the disk budget, split over the writable mounts; the covers and /dev are read-only', async () => {
    const id = await createSandbox();
    // Up to twice the whole budget into each writable mount. background_after 0: a promotable
    // call's output goes to its task's logs, on the very filesystem this fills.
    const fill = await ok(client, 'run_command', {
      sandbox_id: id,
      timeout: 120,
      background_after: 0,
      command:
        `for m in /home/user /tmp /var/tmp /dev/shm; do head -c ${2 * DISK_MB * MIB} /dev/zero > $m/fill; echo "$m $(stat -c %s $m/fill)"; done; ` +
        'for d in / /home /run /dev; do touch $d/x; done',
    });
    const written = Object.fromEntries(
      (fill.stdout as string)
        .trim()
        .split('\n')
        .map((l) => l.split(' ') as [string, string]),
    );
    const total = Object.values(written).reduce((a, b) => a + Number(b), 0);
    expect(total).toBeLessThanOrEqual(DISK_MB * MIB);
    expect(total).toBeGreaterThan(DISK_MB * MIB * 0.9);
    expect(Number(written['/home/user'])).toBeGreaterThan(Number(written['/tmp']));
    expect((fill.stderr as string).match(/No space left on device/g)).toHaveLength(4);
    expect((fill.stderr as string).match(/Read-only file system/g)).toHaveLength(4);
    // The result says which limit the command met.
    expect(fill.stderr).toMatch(/\[sandbox-mcp\] The sandbox's disk is full at \/home\/user, \/tmp, \/var\/tmp, \/dev\/shm/);
    // A full disk does not stop the sandbox: the next command cleans up.
    expect((await run(id, 'rm /tmp/fill && echo freed')).stdout).toBe('freed\n');
    // run_code's writer meets the same budget (up to twice /tmp's whole share), and is told so.
    const viaCode = await ok(client, 'run_code', {
      sandbox_id: id,
      language: 'python',
      code: `with open('/tmp/fill', 'wb') as f:\n    for _ in range(${2 * DISK_MB}):\n        f.write(bytes(${MIB}))\n        f.flush()\nprint('not stopped')`,
      timeout: 120,
    });
    expect(viaCode.exit_code).not.toBe(0);
    expect(viaCode.stdout).toBe('');
    expect(viaCode.stderr).toMatch(/No space left on device/);
    expect(viaCode.stderr).toMatch(/\[sandbox-mcp\] The sandbox's disk is full at .*\/tmp/);
    expect(Number((await run(id, 'stat -c %s /tmp/fill')).stdout)).toBeLessThanOrEqual((DISK_MB * MIB) / 4);
    await ok(client, 'kill_sandbox', { sandbox_id: id });
  });

  it("SysV shared memory is bounded by /dev/shm's share and dies with its processes (root); a non-root server keeps the kernel's defaults", async () => {
    const id = await createSandbox();
    // /dev/shm's share of the disk budget (an eighth) bounds SysV shared memory too, where the keeper can set it.
    const boundMb = isRoot ? DISK_MB / 8 : null;
    const rec = readKeeperRecord(join(stateDir, 'local', id.replace(/^local:/, '')));
    expect(rec?.enforced?.sysvShmMb).toBe(boundMb);
    const tryBytes = 2 * (DISK_MB / 8) * MIB;
    const segments = 'tail -n +2 /proc/sysvipc/shm | wc -l';
    // Segments of 1 MiB up to twice the bound, then one segment of twice the bound.
    const first = await run(id, `python3 shm.py ${MIB} ${tryBytes} ${tryBytes}; ${segments}`);
    const [line, left] = (first.stdout as string).trim().split('\n');
    if (isRoot) {
      expect(line).toBe(`made=${boundMb! * MIB} err=ENOSPC big=EINVAL`);
      // shm_rmid_forced: the segments died with the process that made them, the written one too.
      expect(left).toBe('0');
      // So the next process has the whole bound again.
      expect((await run(id, `python3 shm.py ${MIB} ${tryBytes} ${MIB}`)).stdout).toBe(`made=${boundMb! * MIB} err=ENOSPC big=ENOSPC\n`);
    } else {
      // A keeper that is not root may not set the namespace's sysctls: the kernel's defaults hold, and the
      // segments stay until the sandbox ends (its IPC namespace with it).
      expect(line).toBe(`made=${tryBytes} err=None big=None`);
      expect(Number(left)).toBe(tryBytes / MIB + 1);
    }
    await ok(client, 'kill_sandbox', { sandbox_id: id });
  });

  it('a task writing logs while the disk fills ends with a valid status and its true outcome', async () => {
    const id = await createSandbox();
    const task = await ok(client, 'start_task', {
      sandbox_id: id,
      command: 'i=0; until [ -e /tmp/go ]; do echo "tick $i"; i=$((i+1)); sleep 0.01; done; echo finished; exit 3',
    });
    // Fills the home, where the task's logs and status live, then lets the task end.
    await run(id, `head -c ${DISK_MB * MIB} /dev/zero > ~/fill; touch /tmp/go`);
    const view = await finished({ sandbox_id: id, task_id: task.task_id });
    expect(view).toMatchObject({ state: 'failed', exit_code: 3 });
    expect(view.stdout).toMatch(/^tick 0\n/);
    await ok(client, 'kill_sandbox', { sandbox_id: id });
  });

  if (!situation.controllers.memory) {
    it(`${situation.name}: no memory cgroup can be made, so nothing claims a memory limit and asking for one is unsupported`, async () => {
      expect(await toolError(client, 'create_sandbox', { memory: MEMORY_MB })).toMatchObject({ category: 'unsupported' });
      const id = await createSandbox();
      expect(await ok(client, 'get_sandbox', { sandbox_id: id })).toMatchObject({ memory_mb: null });
    });
  } else
    it(`${situation.name}: memory: the allocating process is killed, never pid 1; a running task and the next run_command survive`, async () => {
      const id = await createSandbox({ memory: MEMORY_MB });
      expect(await ok(client, 'get_sandbox', { sandbox_id: id })).toMatchObject({ memory_mb: MEMORY_MB, disk_size_mb: MEMORY_MB / 2 });
      const sleeper = await ok(client, 'start_task', { sandbox_id: id, command: 'echo up; sleep 100' });
      const hog = `python3 -c "b = b'x' * ${2 * MEMORY_MB * MIB}; print('not killed')"`;
      const killed = await run(id, hog);
      expect(killed.exit_code).toBe(137);
      expect(killed.stdout).toBe('');
      expect(killed.stderr).toMatch(/\[sandbox-mcp\] The sandbox reached its memory limit \(128 MB/);
      expect((await run(id, 'echo still here')).stdout).toBe('still here\n');
      // run_code's allocating process is the victim too.
      const viaCode = await ok(client, 'run_code', {
        sandbox_id: id,
        language: 'python',
        code: `b = b'x' * ${2 * MEMORY_MB * MIB}\nprint('not killed')`,
        timeout: 120,
      });
      expect(viaCode).toMatchObject({ exit_code: 137, stdout: '' });
      expect(viaCode.stderr).toMatch(/\[sandbox-mcp\] The sandbox reached its memory limit \(128 MB/);
      expect((await ok(client, 'get_task', { sandbox_id: id, task_id: sleeper.task_id })).state).toBe('running');
      // A task whose command is the hog ends failed with its exit code and its logs, and the note says why.
      const hogTask = await ok(client, 'start_task', { sandbox_id: id, command: `echo before; ${hog}` });
      const view = await finished({ sandbox_id: id, task_id: hogTask.task_id });
      expect(view).toMatchObject({ state: 'failed', exit_code: 137, stdout: 'before\n' });
      const withNote = await call(client, 'get_task', { sandbox_id: id, task_id: hogTask.task_id });
      expect(notesOf(withNote)).toMatch(/memory limit \(128 MB/);
      expect((await ok(client, 'get_task', { sandbox_id: id, task_id: sleeper.task_id })).state).toBe('running');
      await ok(client, 'kill_sandbox', { sandbox_id: id });
    });

  it('server-wide caps: envs size, waiting get_task calls per sandbox, live sandboxes', async () => {
    const big = Object.fromEntries(Array.from({ length: 3 }, (_, i) => [`V${i}`, 'x'.repeat(30_000)]));
    const tooBig = await toolError(client, 'create_sandbox', { envs: big });
    expect(tooBig).toMatchObject({ category: 'invalid_argument' });
    expect(tooBig.suggestion).toMatch(/`envs`/);
    expect(tooBig.text).not.toContain('xxxx');
    const id = await createSandbox();
    expect(await toolError(client, 'run_command', { sandbox_id: id, command: 'true', envs: big })).toMatchObject({
      category: 'invalid_argument',
    });

    // One waiting get_task per sandbox on this server: of two at the same time, one is refused.
    const task = await ok(client, 'start_task', { sandbox_id: id, command: 'sleep 30' });
    const handle = { sandbox_id: id, task_id: task.task_id };
    const both = await Promise.all([call(client, 'get_task', { ...handle, wait: 5 }), call(client, 'get_task', { ...handle, wait: 5 })]);
    const refusedWait = both.filter((r) => r.isError);
    expect(refusedWait).toHaveLength(1);
    expect(JSON.parse((refusedWait[0]!.content[0] as { text: string }).text).error).toMatchObject({
      category: 'insufficient_resources',
      code: 'wait_limit',
    });
    // One that does not wait is never refused.
    expect((await ok(client, 'get_task', handle)).state).toBe('running');

    // Three live sandboxes on this server: the fourth create is refused, saying which limit and how to raise it.
    await createSandbox();
    await createSandbox();
    const full = await toolError(client, 'create_sandbox', {});
    expect(full).toMatchObject({ category: 'insufficient_resources', code: 'sandbox_limit' });
    expect(full.suggestion).toMatch(/--max-sandboxes|SANDBOX_MCP_MAX_SANDBOXES/);
    await ok(client, 'kill_sandbox', { sandbox_id: id });
    await createSandbox();
  });
});
