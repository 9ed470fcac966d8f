// The pieces of long calls that need no sandbox: the server option's parsing, the run_command
// result schema that tells a finished call from a promoted one, and which outcomes keep the sandbox.
import { describe, expect, it } from 'vitest';
import { BACKGROUND_AFTER_DEFAULT_S, ConfigError, loadConfig } from '../../host/config/config.js';
import { ExecResultSchema } from '../../host/mcp/tools/exec-result.js';
import { keepsSandbox } from '../../host/mcp/tools/promote.js';

describe('--background-after / SANDBOX_MCP_BACKGROUND_AFTER', () => {
  it('is 50 s by default (below a 60 s client cut), read from the environment, 0 turns it off, and the flag wins', () => {
    expect(BACKGROUND_AFTER_DEFAULT_S).toBe(50);
    expect(loadConfig({}).backgroundAfterS).toBe(BACKGROUND_AFTER_DEFAULT_S);
    expect(loadConfig({ SANDBOX_MCP_BACKGROUND_AFTER: '' }).backgroundAfterS).toBe(BACKGROUND_AFTER_DEFAULT_S);
    expect(loadConfig({ SANDBOX_MCP_BACKGROUND_AFTER: '20' }).backgroundAfterS).toBe(20);
    expect(loadConfig({ SANDBOX_MCP_BACKGROUND_AFTER: '0' }).backgroundAfterS).toBe(0);
    expect(loadConfig({ SANDBOX_MCP_BACKGROUND_AFTER: '50' }, { backgroundAfter: '7' }).backgroundAfterS).toBe(7);
  });

  it('refuses anything but whole seconds 0-3600, naming the option', () => {
    for (const bad of ['3601', '1.5', '-1', 'ten', ' 5']) {
      expect(() => loadConfig({}, { backgroundAfter: bad }), bad).toThrow(ConfigError);
      expect(() => loadConfig({ SANDBOX_MCP_BACKGROUND_AFTER: bad }), bad).toThrow(/SANDBOX_MCP_BACKGROUND_AFTER/);
    }
  });

  it('reads the progress interval (for tests) and refuses a bad one', () => {
    expect(loadConfig({}).progressIntervalMs).toBeUndefined();
    expect(loadConfig({ SANDBOX_MCP_PROGRESS_INTERVAL_MS: '250' }).progressIntervalMs).toBe(250);
    expect(() => loadConfig({ SANDBOX_MCP_PROGRESS_INTERVAL_MS: '0' })).toThrow(/SANDBOX_MCP_PROGRESS_INTERVAL_MS/);
  });
});

describe('the run_command result schema', () => {
  const finished = { exit_code: 0, stdout: 'x', stderr: '', stdout_truncated: false, stderr_truncated: false, timed_out: false };
  const handle = {
    backgrounded: true,
    sandbox_id: 'local:sb',
    task_id: 'a'.repeat(32),
    state: 'running',
    started_at: 1,
    finished_at: null,
    stdout_next_offset: 1,
    stderr_next_offset: 0,
    stdout_size: 1,
    stderr_size: 0,
  };

  it('accepts the six fields alone, and the six with a complete handle', () => {
    expect(ExecResultSchema.safeParse(finished).success).toBe(true);
    expect(ExecResultSchema.safeParse({ ...finished, exit_code: null, ...handle }).success).toBe(true);
  });

  it('refuses handle fields without backgrounded, and backgrounded without its handle', () => {
    const stray = ExecResultSchema.safeParse({ ...finished, task_id: 'a'.repeat(32) });
    expect(stray.success).toBe(false);
    expect(stray.error?.issues[0]?.path).toEqual(['task_id']);
    const { task_id: _omitted, ...incomplete } = handle;
    const partial = ExecResultSchema.safeParse({ ...finished, ...incomplete });
    expect(partial.success).toBe(false);
    expect(partial.error?.issues[0]?.path).toEqual(['task_id']);
  });
});

describe('keepsSandbox: a promotable run keeps its sandbox past the session while a task may run in it', () => {
  const view = { task_id: 'a'.repeat(32) } as never;

  it('keeps it for a promoted or uncertain start, an unconfirmed stop, and when the run threw before any outcome', () => {
    expect(keepsSandbox({ kind: 'promoted', view })).toBe(true);
    expect(keepsSandbox({ kind: 'uncertain', view })).toBe(true);
    expect(keepsSandbox({ kind: 'abandoned', isStopped: false })).toBe(true);
    expect(keepsSandbox(undefined)).toBe(true);
  });

  it('lets it go for a refused start, a finished command and a confirmed stop', () => {
    expect(keepsSandbox({ kind: 'rejected', error: new Error('refused') })).toBe(false);
    expect(keepsSandbox({ kind: 'finished', view, isPageZero: true })).toBe(false);
    expect(keepsSandbox({ kind: 'abandoned', isStopped: true })).toBe(false);
  });
});

describe('SANDBOX_MCP_RESIDENT_IDLE_EXIT_S', () => {
  it('reads whole seconds 0-86400 (absent: the provider default) and refuses anything else, naming the variable', () => {
    expect(loadConfig({}).residentIdleExitS).toBeUndefined();
    expect(loadConfig({ SANDBOX_MCP_RESIDENT_IDLE_EXIT_S: '5' }).residentIdleExitS).toBe(5);
    expect(loadConfig({ SANDBOX_MCP_RESIDENT_IDLE_EXIT_S: '0' }).residentIdleExitS).toBe(0);
    for (const bad of ['86401', '1.5', '-1', 'ten', ' 5']) {
      expect(() => loadConfig({ SANDBOX_MCP_RESIDENT_IDLE_EXIT_S: bad }), bad).toThrow(/SANDBOX_MCP_RESIDENT_IDLE_EXIT_S/);
    }
  });
});
