// `sandbox-mcp doctor` on this machine (where local sandboxes work, CI included) and where
// bubblewrap is hidden from it; and the server's one start-up warning line that points to it.
import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectStdio, ok, serverEnv } from '../support/built-server.js';
import { HOST_JS } from '../support/paths.js';
import { requireSandboxes } from '../support/prerequisites.js';
import { destroyStateDir, tempStateDir } from '../support/state-dir.js';

const stateDir = tempStateDir();
const scratch = mkdtempSync(join(tmpdir(), 'sandbox-mcp-doctor-'));
// A value the doctor must never print, though it reports whether the key is set.
const E2B_KEY = 'e2b_doctor_test_key_0123456789abcdef';

function doctor(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [HOST_JS, 'doctor', ...args],
      { env: serverEnv({ SANDBOX_MCP_STATE_DIR: stateDir, ...env }), timeout: 120_000 },
      (error, stdout, stderr) => resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

interface Report {
  ok: boolean;
  version: string;
  checks: { name: string; status: 'ok' | 'warn' | 'fail'; message: string; fix?: string }[];
}

beforeAll(() => requireSandboxes());
afterAll(async () => {
  await destroyStateDir(stateDir);
  rmSync(scratch, { recursive: true, force: true });
});

describe('sandbox-mcp doctor', () => {
  it('passes here: every check ok or warn, a real sandbox ran node and python3, exit 0, the key never shown', async () => {
    const { code, stdout } = await doctor(['--json'], { E2B_API_KEY: E2B_KEY });
    const report = JSON.parse(stdout) as Report;
    const byName = new Map(report.checks.map((c) => [c.name, c]));
    expect(report.checks.filter((c) => c.status === 'fail')).toEqual([]);
    expect(report.ok).toBe(true);
    expect(code).toBe(0);
    for (const name of ['node', 'bubblewrap', 'user namespaces', 'nsenter', 'setpriv', 'cgroups', 'state directory', 'server files']) {
      expect(byName.get(name), name).toBeDefined();
    }
    expect(byName.get('node')!.status).toBe('ok');
    expect(byName.get('bubblewrap')!.message).toMatch(/^bubblewrap \d+\.\d+/);
    expect(byName.get('user namespaces')!.status).toBe('ok');
    expect(byName.get('sandbox')!.status).toBe('ok');
    expect(byName.get('node in sandbox')!.message).toMatch(/node v\d+/);
    expect(byName.get('python3 in sandbox')!.message).toMatch(/python3 3\.\d+/);
    expect(byName.get('cgroups')!.message).toMatch(/cgroup (v1|v2|hybrid)/);
    // Which layer holds each limit here: rlimits always; memory and pids where the cgroup check found them.
    const limits = byName.get('resource limits')!;
    expect(limits.message).toMatch(/processes: 1024 per sandbox by RLIMIT_NPROC/);
    expect(limits.message).toMatch(/open files: 4096 per process by RLIMIT_NOFILE/);
    expect(limits.message).toMatch(/disk: \d+ MB by sized tmpfs mounts/);
    const hasMemoryCgroup = /memory/.test(byName.get('cgroups')!.message.split(';')[1] ?? '') && byName.get('cgroups')!.status === 'ok';
    expect(limits.status).toBe(hasMemoryCgroup ? 'ok' : 'warn');
    expect(byName.get('E2B_API_KEY')).toMatchObject({ status: 'ok', message: expect.stringContaining('set') });
    expect(stdout).not.toContain(E2B_KEY);
  });

  it('prints ok/warn/fail lines for people, ending in the verdict', async () => {
    const { code, stdout } = await doctor([]);
    const lines = stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^sandbox-mcp doctor \d+\.\d+\.\d+/);
    expect(lines.filter((l) => /^(ok|warn|fail) /.test(l)).length).toBeGreaterThanOrEqual(10);
    expect(lines.at(-1)).toBe('Local sandboxes work here.');
    expect(code).toBe(0);
  });

  it('fails with a useful line where bubblewrap is hidden from it, and tries no sandbox', async () => {
    const { code, stdout } = await doctor([], { SANDBOX_MCP_BWRAP: join(scratch, 'no-such-bwrap') });
    expect(code).toBe(1);
    expect(stdout).toMatch(/^fail +bubblewrap +SANDBOX_MCP_BWRAP does not name an executable file$/m);
    expect(stdout).toMatch(/fix: point SANDBOX_MCP_BWRAP at the bwrap binary/);
    expect(stdout).toMatch(/^fail +sandbox +not tried/m);
    expect(stdout.trimEnd().split('\n').at(-1)).toBe('Local sandboxes cannot work here until the failures above are fixed.');
  });

  it('fails naming the missing options when the bwrap found is not a real bubblewrap', async () => {
    const fake = join(scratch, 'fake-bwrap');
    writeFileSync(fake, '#!/bin/sh\necho "bubblewrap 0.1.0"\n');
    chmodSync(fake, 0o755);
    const { code, stdout } = await doctor(['--json'], { SANDBOX_MCP_BWRAP: fake });
    const report = JSON.parse(stdout) as Report;
    const bwrap = report.checks.find((c) => c.name === 'bubblewrap')!;
    expect(bwrap.status).toBe('fail');
    expect(bwrap.message).toContain('bubblewrap 0.1.0');
    expect(bwrap.message).toContain('--as-pid-1');
    expect(bwrap.fix).toContain('apt-get install bubblewrap');
    expect(report.ok).toBe(false);
    expect(code).toBe(1);
  });
});

describe('the start-up warning', () => {
  it('is one stderr line pointing to doctor when the default provider cannot work, and absent when it can', async () => {
    const broken = await connectStdio({ SANDBOX_MCP_STATE_DIR: stateDir, SANDBOX_MCP_BWRAP: join(scratch, 'no-such-bwrap') });
    try {
      await broken.client.listTools();
      const warnings = broken
        .stderr()
        .split('\n')
        .filter((l) => l.startsWith('sandbox-mcp: warning:'));
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toContain('the local provider cannot work here');
      expect(warnings[0]).toContain('bubblewrap');
      expect(warnings[0]).toContain('sandbox-mcp doctor');
    } finally {
      await broken.close();
    }
    const healthy = await connectStdio({ SANDBOX_MCP_STATE_DIR: stateDir });
    try {
      await ok(healthy.client, 'list_sandboxes', {});
      expect(healthy.stderr()).not.toContain('sandbox-mcp: warning');
      // Not a terminal: no line for people either.
      expect(healthy.stderr()).not.toContain('waiting for an MCP client');
    } finally {
      await healthy.close();
    }
  });
});
