// `agent.cjs selftest`: checks, in a scratch directory, everything the agent relies on inside a
// sandbox: /proc, process groups, atomic rename, private state directory, the log cap and
// masking (in-process and through a real supervisor), and a task's stdin pipe.
import { existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, statSync, closeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { nodeRelaunch } from '../shared/agent-runtime.js';
import { LIMITS, SECRET_MARKER } from '../shared/limits.js';
import type { SelftestResult } from '../shared/protocol.js';
import { CappedLog } from './capped-log.js';
import { ensureTasksDir, stateDir, TASK_FILES } from './paths.js';
import { hasLiveGroupMembers, readProcStat, signalGroup } from './proc.js';
import type { TaskStatus } from '../shared/status.js';
import { deliverInput } from './ops/input.js';
import { writeFileAtomic } from './status-file.js';
import { readStatus } from './status-read.js';
import type { TaskRequestFile } from './task-request.js';
import { pickShell } from './supervisor.js';
import { DEFAULT_TIMINGS, sleep } from './timing.js';
import { childProcess, crypto } from './node-modules.js';

type Check = SelftestResult['checks'][number];

/** Runs every check (each bounded in time) and reports them all; ok only if all pass. */
export async function runSelftest(): Promise<SelftestResult> {
  const checks: Check[] = [];
  const run = async (name: string, fn: () => Promise<string | undefined> | string | undefined) => {
    try {
      const detail = await fn();
      checks.push(detail === undefined ? { name, ok: true } : { name, ok: true, detail });
    } catch (err) {
      checks.push({ name, ok: false, detail: (err as Error).message });
    }
  };
  let scratch: string | undefined;
  try {
    scratch = mkdtempSync(join(tmpdir(), 'sandbox-agent-selftest-'));
  } catch (err) {
    // Still a report: the checks that need no scratch space run, the others fail saying why.
    checks.push({
      name: 'scratch',
      ok: false,
      detail: `no scratch directory in the temp dir (${(err as NodeJS.ErrnoException).code ?? 'error'}); set TMPDIR`,
    });
  }
  const inScratch = (fn: (dir: string) => Promise<string | undefined> | string | undefined) => () => {
    if (scratch === undefined) throw new Error('skipped: no scratch directory');
    return fn(scratch);
  };
  try {
    await run('proc', checkProc);
    await run('state_dir', checkStateDir);
    await run('atomic_rename', inScratch(checkAtomicRename));
    await run('process_group', checkProcessGroup);
    await run('log_cap', inScratch(checkCap));
    await run('masking', inScratch(checkMasking));
    await run('supervisor', inScratch(checkSupervisor));
    await run('stdin', inScratch(checkStdin));
  } finally {
    if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
  }
  return { ok: checks.every((c) => c.ok), checks };
}

function assert(condition: unknown, message: string): asserts condition {
  if (!condition) throw new Error(message);
}

function checkProc(): string {
  const self = readProcStat(process.pid);
  assert(self && self.startTime > 0, '/proc/<pid>/stat is not readable or has no start time');
  return `start time ${self.startTime} ticks, pgid ${self.pgid}`;
}

function checkStateDir(): string {
  ensureTasksDir();
  const mode = statSync(stateDir()).mode & 0o777;
  assert(mode === 0o700, `state directory mode is ${mode.toString(8)}, expected 700`);
  return stateDir();
}

function checkAtomicRename(scratch: string): undefined {
  const path = join(scratch, 'atomic.json');
  writeFileAtomic(path, '{"a":1}\n');
  writeFileAtomic(path, '{"a":2}\n');
  assert(readFileSync(path, 'utf8') === '{"a":2}\n', 'rename did not replace the file');
  assert(readdirSync(scratch).length === 1, 'a temporary file was left behind');
  return undefined;
}

async function checkProcessGroup(): Promise<string> {
  const { spawn } = childProcess();
  const child = spawn(pickShell(), ['-c', 'sleep 30 & sleep 30 & echo ready; wait'], {
    detached: true,
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    await new Promise<void>((resolve, reject) => {
      child.stdout!.once('data', () => resolve());
      child.once('error', reject);
      exited.then(
        () => reject(new Error('the shell exited early')),
        (err: unknown) => reject(err instanceof Error ? err : new Error(String(err))),
      );
    });
    const pgid = child.pid!;
    assert(readProcStat(pgid)?.pgid === pgid, 'a detached child does not lead its own process group');
    assert(signalGroup(pgid, 'SIGTERM'), 'the process group could not be signalled');
    await Promise.race([exited, sleep(2000)]);
    // The shell is reaped now; its two children were reparented and must be gone as well.
    for (let i = 0; i < 200 && hasLiveGroupMembers(pgid); i++) await sleep(10);
    assert(!hasLiveGroupMembers(pgid), 'the process group survived SIGTERM');
    return `a shell and its two children stopped through group ${pgid}`;
  } finally {
    if (child.pid) signalGroup(child.pid, 'SIGKILL');
    child.stdout?.destroy();
  }
}

function checkCap(scratch: string): undefined {
  const path = join(scratch, 'cap.log');
  const fd = openSync(path, 'w', 0o600);
  const log = new CappedLog(fd, 1000, []);
  for (let i = 0; i < 30; i++) log.push(Buffer.alloc(100, 0x61));
  log.end();
  closeSync(fd);
  assert(statSync(path).size === 1000 && log.isTruncated, 'the cap did not keep exactly its size and flag truncation');
  return undefined;
}

async function checkMasking(scratch: string): Promise<undefined> {
  const { randomBytes } = crypto();
  const secret = randomBytes(12).toString('hex');
  const path = join(scratch, 'mask.log');
  const fd = openSync(path, 'w', 0o600);
  const log = new CappedLog(fd, 1 << 20, [secret]);
  // One byte per read: the hardest split there is.
  for (const byte of Buffer.from(`before ${secret} after`)) log.push(Buffer.of(byte));
  log.end();
  closeSync(fd);
  assert(readFileSync(path, 'utf8') === `before ${SECRET_MARKER} after`, 'a secret split across reads was not masked');
  return undefined;
}

async function checkSupervisor(scratch: string): Promise<string> {
  const { randomBytes } = crypto();
  const token = randomBytes(16).toString('hex');
  const { dir, status } = await superviseInScratch(
    scratch,
    'task',
    { command: `printf '%s' "$SANDBOX_SELFTEST_TOKEN"; head -c ${LIMITS.streamCapBytes + 4096} /dev/zero` },
    { SANDBOX_SELFTEST_TOKEN: token },
  );
  const log = readFileSync(join(dir, TASK_FILES.stdout));
  assert(
    log.length === LIMITS.streamCapBytes && status.stdout_truncated,
    'the supervisor did not cap stdout at exactly 1 MiB with truncation',
  );
  assert(
    !log.includes(token) && log.subarray(0, SECRET_MARKER.length).toString() === SECRET_MARKER,
    'the supervisor did not mask an environment secret',
  );
  assert(existsSync(join(dir, TASK_FILES.stderr)), 'the supervisor wrote no stderr log');
  return `capped, masked and finished with exit code ${String(status.exit_code)}`;
}

async function checkStdin(scratch: string): Promise<string> {
  const { dir } = await superviseInScratch(
    scratch,
    'stdin-task',
    { command: `read -r line; printf 'got:%s|' "$line"; cat`, stdin: true },
    {},
    async (dir, running) => {
      // A generous bound: the supervisor confirms the close from its own event loop, which a loaded
      // machine may hold up for seconds; the selftest checks that it happens, not how fast.
      const delivered = await deliverInput(dir, running, Buffer.from('ping\nrest'), true, { ...DEFAULT_TIMINGS, inputWaitMs: 10_000 });
      assert(delivered.bytes_written === 9 && delivered.stdin_closed, 'input was not taken whole, or stdin was not closed');
    },
  );
  assert(readFileSync(join(dir, TASK_FILES.stdout), 'utf8') === 'got:ping|rest', 'the command did not read the input, then EOF');
  return 'a waiting `read` got its line, and `cat` ended at eof';
}

/**
 * Runs a real supervisor on `command` in a scratch task directory until the task succeeds (at most
 * 10 s), calling `whileRunning` once it reports `running`; returns the directory and final status.
 */
async function superviseInScratch(
  scratch: string,
  name: string,
  task: { command: string; stdin?: boolean },
  env: Record<string, string>,
  whileRunning?: (dir: string, running: TaskStatus) => Promise<void>,
): Promise<{ dir: string; status: TaskStatus }> {
  const { spawn } = childProcess();
  const { randomBytes } = crypto();
  const dir = join(scratch, name);
  mkdirSync(dir, { mode: 0o700 });
  const request: TaskRequestFile = {
    task_id: randomBytes(16).toString('hex'),
    command: task.command,
    cwd: scratch,
    timeout_s: 20,
    grace_ms: 500,
    drain_ms: 200,
    poll_ms: 20,
    stdin: task.stdin ?? false,
  };
  writeFileAtomic(join(dir, TASK_FILES.request), JSON.stringify(request));
  const node = nodeRelaunch(process.execPath, [resolve(process.argv[1]!), 'supervise', dir]);
  const child = spawn(node.file, node.args, {
    detached: true,
    stdio: 'ignore',
    env: { ...process.env, ...env },
  });
  let spawnError: string | undefined;
  child.once('error', (err: NodeJS.ErrnoException) => (spawnError = err.code ?? 'error'));
  let hasExited = false;
  child.once('exit', () => (hasExited = true));
  let status = readStatus(dir);
  const isDone = () => status.kind === 'ok' && status.status.state !== 'running';
  try {
    let pending = whileRunning;
    for (let i = 0; i < 1000 && !isDone() && spawnError === undefined; i++) {
      if (pending && status.kind === 'ok') {
        const running = status.status;
        pending = undefined;
        await whileRunning!(dir, running);
      }
      await sleep(10);
      status = readStatus(dir);
    }
  } finally {
    // Not finished in time: ask the supervisor to stop its command (as cancel does) rather than
    // leave both running. It is verifiably ours: our own child, not yet reaped.
    if (!hasExited && !isDone()) child.kill('SIGTERM');
    child.unref();
  }
  assert(spawnError === undefined, `the supervisor could not be started (${spawnError})`);
  assert(status.kind === 'ok', 'the supervisor wrote no readable status');
  assert(status.status.state === 'succeeded', `the supervised command ended ${status.status.state}, expected succeeded`);
  return { dir, status: status.status };
}
