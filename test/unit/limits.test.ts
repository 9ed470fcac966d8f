// The pure parts of the resource limits: defaults and maxima, the process tiers, the disk split,
// the server's flags and variables, the waiting-call gate and the envs bound; and the entry
// prelude run by real bash and dash (outside any sandbox: what it sets is what /proc shows).
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import * as z from 'zod';
import { LIMITS } from '../../shared/limits.js';
import { ConfigError, loadConfig } from '../../host/config/config.js';
import { isProviderError } from '../../host/providers/provider-error.js';
import { HELP, parseCommandLine } from '../../host/cli/args.js';
import { LIMIT_OPTIONS, limitOptionsHelp } from '../../host/config/limit-options.js';
import { SCRATCH_PATHS } from '../../host/providers/local/launch/bwrap-args.js';
import { AGENT_STATE_MOUNT, DISK_SHARES_SIXTEENTHS, writableMountSizes } from '../../host/providers/local/limits/disk-shares.js';
import { describeLayers } from '../../host/providers/local/limits/layers.js';
import { exceedsCeiling } from '../../host/providers/local/limits/memory-ceiling.js';
import { entryPrelude, preludeFor, REFUSED_EXIT, REFUSED_MESSAGE } from '../../host/providers/local/limits/entry-prelude.js';
import {
  cleanupFrom,
  cleanupLimitFor,
  pidsMaxFor,
  processLimitFor,
  refuseStartAt,
} from '../../host/providers/local/limits/process-tiers.js';
import { chooseSandboxLimits, diskBudgetMb } from '../../host/providers/local/limits/sandbox-limits.js';
import {
  DEFAULT_MEMORY_CAP_MB,
  defaultMaxMemoryMb,
  defaultMaxTotalMemoryMb,
  defaultMemoryMb,
  MIN_PROCESSES,
  resolveLimitSettings,
} from '../../host/providers/local/limits/settings.js';
import { leftovers, type SandboxProcess } from '../../host/providers/local/exec/stop-processes.js';
import { validateEnvs } from '../../host/providers/local/validation.js';
import { agentRuntimeArgv } from '../../shared/agent-runtime.js';
import { SANDBOX_HOME } from '../../host/providers/provider.js';
import { EnvsSchema } from '../../host/mcp/tools/tool.js';
import { WaitGate } from '../../host/tasks/wait-gate.js';
import { describeIssue } from '../../shared/protocol.js';

const GIB = 1024 * 1024 * 1024;

/** The error a call throws (failing the test when it does not). */
function thrown(f: () => unknown): unknown {
  try {
    f();
  } catch (e) {
    return e;
  }
  throw new Error('expected a throw');
}

describe('limit settings', () => {
  it('defaults: a quarter of the memory up to 4 GiB, half of it at most; the documented fixed values', () => {
    expect(defaultMemoryMb(8 * GIB)).toBe(2048);
    expect(defaultMemoryMb(64 * GIB)).toBe(DEFAULT_MEMORY_CAP_MB);
    expect(defaultMaxMemoryMb(64 * GIB)).toBe(32 * 1024);
    expect(defaultMaxMemoryMb(1 * GIB)).toBe(512);
    const s = resolveLimitSettings();
    expect(s).toMatchObject({ maxSandboxes: 16, processes: 1024, openFiles: 4096, diskMb: 2048 });
    expect(s.memoryMb).toBeLessThanOrEqual(s.maxMemoryMb);
    // All sandboxes together: half of RAM (as much as one may ask for), the other half for the person's programs.
    expect(defaultMaxTotalMemoryMb(16 * GIB)).toBe(8 * 1024);
    expect(s.maxTotalMemoryMb).toBe(defaultMaxTotalMemoryMb());
    expect(s.maxMemoryMb).toBeLessThanOrEqual(s.maxTotalMemoryMb);
    // A smaller ceiling lowers the defaults below it; an explicit maximum above it is a conflict, by code.
    expect(resolveLimitSettings({ maxTotalMemoryMb: 100 })).toMatchObject({ maxTotalMemoryMb: 100, maxMemoryMb: 100 });
    expect(resolveLimitSettings({ maxTotalMemoryMb: 100 }).memoryMb).toBeLessThanOrEqual(100);
    expect(thrown(() => resolveLimitSettings({ maxTotalMemoryMb: 100, maxMemoryMb: 200 }))).toMatchObject({
      category: 'invalid_argument',
      code: 'max_memory_above_total',
    });
  });

  it("the memory ceiling where no parent cgroup holds it: the running sandboxes' memory limits are counted", () => {
    const counting = { isCounting: true, limitsMb: [100, 200] };
    expect(exceedsCeiling(counting, 100, 400)).toBe(false);
    expect(exceedsCeiling(counting, 101, 400)).toBe(true);
    // Nothing is counted where a parent cgroup holds the ceiling (or no memory cgroup exists at all).
    expect(exceedsCeiling({ isCounting: false, limitsMb: [] }, 10_000, 400)).toBe(false);
  });

  it('refuses values out of range, naming the option', () => {
    const e = thrown(() => resolveLimitSettings({ processes: MIN_PROCESSES - 1 }));
    expect(isProviderError(e) && e.category).toBe('invalid_argument');
    expect((e as Error).message).toMatch(/processes/);
    expect(thrown(() => resolveLimitSettings({ memoryMb: 4096, maxMemoryMb: 1024 }))).toMatchObject({ category: 'invalid_argument' });
  });

  it("create's cpu and memory: within the server's maxima, else invalid_argument naming the field and the maximum, never the value", () => {
    const s = resolveLimitSettings({ memoryMb: 1024, maxMemoryMb: 2048, maxCpu: 2 });
    expect(chooseSandboxLimits(s, {})).toEqual({
      processes: 1024,
      openFiles: 4096,
      memoryMb: 1024,
      diskMb: 2048,
      totalMemoryMb: s.maxTotalMemoryMb,
    });
    expect(chooseSandboxLimits(s, { memoryMb: 2048, cpu: 2 }).memoryMb).toBe(2048);
    for (const [ask, field, max] of [
      [{ memoryMb: 2049 }, 'memory', '2048'],
      [{ cpu: 3 }, 'cpu', '2'],
    ] as const) {
      const e = thrown(() => chooseSandboxLimits(s, ask)) as Error;
      expect(e).toMatchObject({ category: 'invalid_argument' });
      expect(e.message.startsWith(field)).toBe(true);
      expect(e.message).toContain(max);
      expect(e.message).not.toContain(String(Object.values(ask)[0]));
    }
    expect(thrown(() => chooseSandboxLimits(s, { memoryMb: 8 }))).toMatchObject({ category: 'invalid_argument' });
    expect(thrown(() => chooseSandboxLimits(s, { cpu: 0 }))).toMatchObject({ category: 'invalid_argument' });
  });

  it('the disk budget is at most half of an enforced memory limit', () => {
    expect(diskBudgetMb(2048, null)).toBe(2048);
    expect(diskBudgetMb(2048, 8192)).toBe(2048);
    expect(diskBudgetMb(2048, 256)).toBe(128);
  });

  it('the shares cover exactly the writable mounts and sum to the budget', () => {
    expect(Object.keys(DISK_SHARES_SIXTEENTHS).sort()).toEqual([SANDBOX_HOME, AGENT_STATE_MOUNT, ...SCRATCH_PATHS].sort());
    for (const [isTemplate, hasWorkspace] of [
      [false, true],
      [true, false],
      [true, true],
    ] as const) {
      const sizes = writableMountSizes(64, isTemplate, hasWorkspace);
      expect(sizes[AGENT_STATE_MOUNT]).toBe(4 * 1024 * 1024);
      expect(Object.values(sizes).reduce((a, b) => a + b, 0)).toBe(64 * 1024 * 1024);
    }
    for (const mb of [16, 64, 2048, 2049]) {
      const sizes = writableMountSizes(mb);
      expect(Object.values(sizes).reduce((a, b) => a + b, 0)).toBe(mb * 1024 * 1024);
      for (const bytes of Object.values(sizes)) expect(Number.isInteger(bytes)).toBe(true);
    }
  });

  it('process tiers: tasks stop first, then commands; the server keeps the rest; each refuses before it would hang', () => {
    for (const n of [MIN_PROCESSES, 1024]) {
      expect(processLimitFor(n, 'task')).toBeLessThan(processLimitFor(n, 'command'));
      expect(processLimitFor(n, 'command')).toBeLessThan(processLimitFor(n, 'service'));
      expect(processLimitFor(n, 'service')).toBe(n);
      expect(pidsMaxFor(n)).toBeGreaterThan(n);
      for (const role of ['task', 'service'] as const) {
        expect(refuseStartAt(n, role)).toBeLessThan(processLimitFor(n, role));
        expect(refuseStartAt(n, role)).toBeGreaterThan(0);
      }
      // A command finding the commands' limit reached still runs, on a reserve below the server's share.
      expect(cleanupFrom(n)).toBeLessThan(processLimitFor(n, 'command'));
      expect(cleanupLimitFor(n)).toBeGreaterThan(processLimitFor(n, 'command'));
      expect(cleanupLimitFor(n)).toBeLessThan(refuseStartAt(n, 'service'));
      expect(refuseStartAt(n, 'command')).toBeGreaterThan(cleanupFrom(n));
      expect(refuseStartAt(n, 'command')).toBeLessThan(cleanupLimitFor(n));
    }
  });

  it("stop_processes keeps pid 1's sleep, the agent's supervisors and calls and each task's group, node run directly or on the agent runtime", () => {
    const agent = '/home/user/.sandbox-mcp/agent-0.1.0.cjs';
    let next = 10;
    const proc = (ppid: number, argv: string[], pgid?: number): SandboxProcess => {
      const pid = next++;
      return { pid, ppid, pgid: pgid ?? pid, startTime: '1', argv };
    };
    for (const node of [['node'], agentRuntimeArgv()]) {
      next = 10;
      const pid1Sleep = proc(1, ['sleep', '86400']);
      const supervisor = proc(1, [...node, agent, 'supervise', '/t/1']);
      const task = proc(supervisor.pid, ['bash', '-c', 'sleep 1001 & sleep 1002']);
      const taskChild = proc(task.pid, ['sleep', '1001'], task.pid);
      const call = proc(1, [...node, agent, 'call', 'get']);
      const leftover = proc(1, ['sleep', '2001']);
      const notTheAgent = proc(1, [...node, '/home/user/app.cjs', 'supervise']);
      const all = [pid1Sleep, supervisor, task, taskChild, call, leftover, notTheAgent];
      expect(leftovers(all, 1).map((p) => p.argv.at(-1))).toEqual(['2001', 'supervise']);
    }
  });
});

describe('which layer holds each limit', () => {
  const settings = resolveLimitSettings({ memoryMb: 1024, diskMb: 2048 });
  const byLimit = (facts: Parameters<typeof describeLayers>[0]) =>
    Object.fromEntries(describeLayers(facts, settings).map((l) => [l.limit, l]));

  it('with a cgroup and bubblewrap 0.7+: everything holds, the disk at half the memory limit', () => {
    const l = byLimit({
      cgroup: { cpu: 1, memoryMb: 64, pidsMax: 64 },
      hasCeilingCgroup: true,
      bwrapHasSize: true,
      canExemptFromOom: false,
    });
    expect(Object.values(l).filter((x) => x.missing)).toEqual([]);
    expect(l['memory of all sandboxes']!.heldBy).toMatch(/^\d+ MB together by their parent memory cgroup/);
    // A memory cgroup without a parent above it: the limits are counted instead.
    const counted = byLimit({ cgroup: { memoryMb: 64 }, hasCeilingCgroup: false, bwrapHasSize: true, canExemptFromOom: false });
    expect(counted['memory of all sandboxes']!.heldBy).toMatch(
      /by counting their memory limits: a create that would take them above it is refused/,
    );
    expect(l.processes!.heldBy).toMatch(/RLIMIT_NPROC.*pids/);
    expect(l.memory!.heldBy).toMatch(/^1024 MB/);
    expect(l.disk!.heldBy).toMatch(/^512 MB by sized tmpfs/);
  });

  it('without a cgroup or --size: rlimits still hold, and what is missing says how to get it', () => {
    const l = byLimit({ cgroup: {}, hasCeilingCgroup: false, bwrapHasSize: false, canExemptFromOom: false });
    expect(l['memory of all sandboxes']!.heldBy).toBe('none (no memory cgroup)');
    expect(l.processes!.missing).toBeUndefined();
    expect(l['open files']!.missing).toBeUndefined();
    expect(l.memory!.missing).toMatch(/Delegate=yes/);
    expect(l.disk!.missing).toMatch(/bubblewrap 0\.7/);
    expect(l.cpu!.missing).toMatch(/unsupported/);
  });
});

describe('the entry prelude in real shells', () => {
  const shells = ['/bin/bash', '/bin/dash'].filter((s) => existsSync(s));

  it.each(shells)('%s: sets RLIMIT_NPROC, RLIMIT_NOFILE and RLIMIT_CORE (soft = hard) and raises the OOM score', (shell) => {
    const prelude = entryPrelude({ cgroupFdCount: 0, rlimits: { processes: 300, refuseAt: 100_000, openFiles: 200 }, oomScoreAdj: 300 });
    const out = execFileSync(
      shell,
      ['-c', `${prelude}cat /proc/self/limits; cat /proc/self/oom_score_adj; echo "args: $*"`, 'sh', 'a b', 'c'],
      {
        encoding: 'utf8',
      },
    );
    expect(out).toMatch(/^Max processes +300 +300 /m);
    expect(out).toMatch(/^Max open files +200 +200 /m);
    expect(out).toMatch(/^Max core file size +0 +0 /m);
    expect(out).toMatch(/^300$/m);
    // The positional parameters are the caller's still.
    expect(out).toContain('args: a b c');
  });

  it.each(shells)('%s: refuses the entry with a fixed line when the sandbox is at its threshold', (shell) => {
    const prelude = entryPrelude({ cgroupFdCount: 0, rlimits: { processes: 300, refuseAt: 1, openFiles: 200 }, oomScoreAdj: null });
    const r = spawnSync(shell, ['-c', `${prelude}echo ran`], { encoding: 'utf8' });
    expect(r.status).toBe(REFUSED_EXIT);
    expect(r.stdout).toBe('');
    expect(r.stderr.trim()).toBe(REFUSED_MESSAGE);
  });

  it.each(shells)("%s: a command finding the commands' limit reached gets the cleanup reserve instead", (shell) => {
    const limitOf = (from: number) => {
      const prelude = entryPrelude({
        cgroupFdCount: 0,
        rlimits: { processes: 300, refuseAt: 100_000, openFiles: 200, cleanup: { from, processes: 400 } },
        oomScoreAdj: null,
      });
      return /^Max processes +(\d+) +(\d+) /m
        .exec(execFileSync(shell, ['-c', `${prelude}cat /proc/self/limits`], { encoding: 'utf8' }))
        ?.slice(1);
    };
    expect(limitOf(1)).toEqual(['400', '400']);
    expect(limitOf(100_000)).toEqual(['300', '300']);
    // Only run_command and run_code have it.
    const limits = { processes: 1024, openFiles: 4096, memoryMb: 1024, diskMb: 2048 };
    expect(preludeFor(limits, 'command', 0)).toContain(`-ge ${cleanupFrom(1024)} ]; then`);
    for (const role of ['task', 'service'] as const) expect(preludeFor(limits, role, 0)).not.toContain(String(cleanupLimitFor(1024)));
  });

  it('joins each cgroup through its descriptor first, and closes the descriptors', () => {
    const text = entryPrelude({ cgroupFdCount: 2, rlimits: null, oomScoreAdj: null });
    expect(text.startsWith('{ echo $$ >&5 && echo $$ >&6; } 2>/dev/null || exit 125; exec 5>&- 6>&-; ')).toBe(true);
    // A sandbox from before limits gets nothing (it joins from the host, if at all).
    expect(preludeFor(undefined, 'command', 0)).toBe('');
    // Only the caller's own commands raise their OOM score.
    const limits = { processes: 1024, openFiles: 4096, memoryMb: 1024, diskMb: 2048 };
    expect(preludeFor(limits, 'command', 0)).toContain('oom_score_adj');
    expect(preludeFor(limits, 'task', 0)).not.toContain('oom_score_adj');
    expect(preludeFor(limits, 'service', 0)).not.toContain('oom_score_adj');
  });
});

describe('limit flags and variables', () => {
  it('a flag wins over its variable; every option is read; the memory default may not exceed the maximum', () => {
    const env = { SANDBOX_MCP_SANDBOX_PROCESSES: '512', SANDBOX_MCP_MAX_SANDBOXES: '3', SANDBOX_MCP_MAX_WAITING_GETS: '2' };
    const c = loadConfig(env, { limits: { 'sandbox-processes': '700', 'sandbox-disk': '100' } });
    expect(c.localLimits).toEqual({ processes: 700, maxSandboxes: 3, diskMb: 100 });
    expect(c.maxWaitingGets).toBe(2);
    const e = thrown(() => loadConfig({ SANDBOX_MCP_SANDBOX_MEMORY: '4096', SANDBOX_MCP_MAX_SANDBOX_MEMORY: '1024' }));
    expect(e).toBeInstanceOf(ConfigError);
    expect((e as Error).message).toMatch(/--sandbox-memory.*--max-sandbox-memory/);
    const total = thrown(() => loadConfig({ SANDBOX_MCP_MAX_TOTAL_MEMORY: '512', SANDBOX_MCP_MAX_SANDBOX_MEMORY: '1024' }));
    expect((total as Error).message).toMatch(/--max-sandbox-memory.*--max-total-memory \(SANDBOX_MCP_MAX_TOTAL_MEMORY\)/);
    expect(loadConfig({}, { limits: { 'max-total-memory': '3000' } }).localLimits).toEqual({ maxTotalMemoryMb: 3000 });
  });

  it('a bad value names the flag and the variable, not the value', () => {
    for (const bad of ['12abc', '-1', '1.5', '100']) {
      const e = thrown(() => loadConfig({ SANDBOX_MCP_SANDBOX_PROCESSES: bad }));
      expect(e).toBeInstanceOf(ConfigError);
      expect((e as Error).message).toBe(
        `--sandbox-processes (SANDBOX_MCP_SANDBOX_PROCESSES) must be an integer of at least ${MIN_PROCESSES}`,
      );
    }
  });

  it('--help lists every flag with its variable and default, within 96 columns', () => {
    const help = limitOptionsHelp();
    expect(HELP).toContain(help);
    const flat = help.replace(/\s+/g, ' ');
    for (const o of LIMIT_OPTIONS) {
      expect(flat).toContain(`--${o.flag} N`);
      expect(flat).toContain(`(env ${o.env}; default ${o.defaultText})`);
    }
    for (const line of help.split('\n')) expect(line.length).toBeLessThanOrEqual(96);
  });

  it('the limit flags apply to serving and to the doctor, nowhere else', () => {
    expect(parseCommandLine(['http', '--sandbox-disk', '100']).limits).toEqual({ 'sandbox-disk': '100' });
    expect(parseCommandLine(['doctor', '--max-sandboxes', '3']).limits).toEqual({ 'max-sandboxes': '3' });
    expect(() => parseCommandLine(['token-hash', '--sandbox-disk', '100'])).toThrow(/--sandbox-disk applies only to/);
  });
});

describe('server-wide caps', () => {
  it('WaitGate: at most N waiting calls per sandbox; each release counts once', () => {
    const gate = new WaitGate(2);
    const a = gate.enter('local:a');
    gate.enter('local:a');
    expect(thrown(() => gate.enter('local:a'))).toMatchObject({ category: 'insufficient_resources', code: 'wait_limit' });
    gate.enter('local:b');
    a();
    a();
    gate.enter('local:a');
    expect(thrown(() => gate.enter('local:a'))).toMatchObject({ code: 'wait_limit' });
  });

  it('envs: at most LIMITS.envsMaxBytes as NAME=value strings, refused naming `envs` (tools) or the argument (provider)', () => {
    // Each NAME=value takes its bytes, '=' and a NUL: two of 1 + 32768 + 2 and 1 + rest + 2 fill the bound exactly.
    const rest = LIMITS.envsMaxBytes - 32771 - 3;
    const fits = { A: 'x'.repeat(32768), B: 'y'.repeat(rest) };
    const over = { A: 'x'.repeat(32768), B: 'y'.repeat(rest + 1) };
    expect(EnvsSchema.safeParse(fits).success).toBe(true);
    const parsed = z.strictObject({ envs: EnvsSchema }).safeParse({ envs: over });
    expect(parsed.success).toBe(false);
    expect(describeIssue(parsed.error!, { envs: over })).toBe(`field \`envs\` is too long (maximum ${LIMITS.envsMaxBytes} bytes of UTF-8)`);
    expect(validateEnvs(fits, 'envs')).toEqual(fits);
    const e = thrown(() => validateEnvs(over, 'envs')) as Error;
    expect(e).toMatchObject({ category: 'invalid_argument' });
    expect(e.message.startsWith('envs')).toBe(true);
  });
});
