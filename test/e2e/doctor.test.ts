// `sandbox-mcp doctor` on this machine (where local sandboxes work, CI included), where
// bubblewrap is absent or mis-pointed; and the server's one start-up warning line that points to
// it (bubblewrap absent or mis-pointed, a state directory others may write).
import { execFile, spawn } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../host/config/config.js';
import { checkUserNamespaces } from '../../host/cli/doctor/bubblewrap-checks.js';
import { startupWarning } from '../../host/cli/doctor/startup-warning.js';
import { connectStdio, ok, serverEnv, toolError, type StdioServer } from '../support/built-server.js';
import { cgroupSituation } from '../support/cgroup-situation.js';
import { HOST_JS } from '../support/paths.js';
import { hostJsReadableBy } from '../support/readable-build.js';
import { isRootOrSkipping, requireSandboxes } from '../support/prerequisites.js';
import { destroyStateDir, tempStateDir } from '../support/state-dir.js';
import { waitFor } from '../support/wait.js';

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

/**
 * Runs the built CLI (`args`, stdin at EOF) where bubblewrap is not installed, as far as anything
 * can tell: in a private mount namespace, an empty file that nobody may execute is bound over
 * every bwrap on PATH and in the system directories the server also searches (so a PATH without
 * it alone would hide nothing). SANDBOX_MCP_BWRAP is unset.
 */
function withoutBubblewrap(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return withoutProgram('bwrap', args, env);
}

/** The same, for any programs (`bwrap`, `perl`, `skopeo`). */
function withoutProgram(
  programs: string | readonly string[],
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const names = typeof programs === 'string' ? [programs] : programs;
  const empty = join(scratch, `not-${names.join('-')}`);
  writeFileSync(empty, '');
  chmodSync(empty, 0o644);
  const dirs = '$(echo "$PATH" | tr : " ") /usr/local/sbin /usr/local/bin /usr/sbin /usr/bin /sbin /bin';
  const script = names
    .map(
      (program) =>
        `for d in ${dirs}; do if [ -e "$d/${program}" ]; then mount --bind "$0" "$d/${program}" || exit 98; fi; done; ` +
        `for d in ${dirs}; do if [ -x "$d/${program}" ]; then exit 99; fi; done; `,
    )
    .join('')
    .concat('exec "$@"');
  // Root makes the mount namespace itself; anyone else (where bwrap works) in a user namespace.
  const unshare = process.getuid?.() === 0 ? ['-m'] : ['-r', '-m'];
  const { SANDBOX_MCP_BWRAP: _unset, ...rest } = serverEnv({ SANDBOX_MCP_STATE_DIR: stateDir, ...env });
  const child = spawn('unshare', [...unshare, 'sh', '-c', script, empty, process.execPath, HOST_JS, ...args], {
    env: rest,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, stdout, stderr })));
}

// Running a server as nobody needs root.
const asRootForNobody = isRootOrSkipping('the start-up warning of a server running as nobody');

const NOBODY = { uid: 65534, gid: 65534 };
const nobodySituation = asRootForNobody ? cgroupSituation(NOBODY) : undefined;

/** The built server over stdio as nobody, with a state directory of its own and a memory limit configured. */
async function nobodyServer(): Promise<{ server: StdioServer; env: Record<string, string>; state: string }> {
  const state = mkdtempSync(join(tmpdir(), 'sandbox-mcp-doctor-nobody-'));
  chownSync(state, NOBODY.uid, NOBODY.gid);
  const env = { SANDBOX_MCP_STATE_DIR: state, SANDBOX_MCP_SANDBOX_MEMORY: '512' };
  return { server: await connectStdio(env, [], NOBODY), env, state };
}

/** `doctor --json` as another user. */
function doctorAs(as: { uid: number; gid: number }, env: Record<string, string>): Promise<Report> {
  return new Promise((resolve, reject) =>
    execFile(
      process.execPath,
      [hostJsReadableBy(as), 'doctor', '--json'],
      { env: serverEnv(env), uid: as.uid, gid: as.gid, cwd: '/', timeout: 120_000 },
      (_error, stdout) => {
        try {
          resolve(JSON.parse(stdout) as Report);
        } catch (e) {
          reject(e as Error);
        }
      },
    ),
  );
}

const warningsIn = (stderr: string) => stderr.split('\n').filter((l) => l.startsWith('sandbox-mcp: warning:'));

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
    for (const name of [
      'node',
      'bubblewrap',
      'user namespaces',
      'nsenter',
      'setpriv',
      'flock',
      'perl',
      'cgroups',
      'state directory',
      'server files',
    ]) {
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
    expect(byName.get('skopeo')).toMatchObject({ status: 'ok', message: expect.stringMatching(/^skopeo at \/\S+ \(template pull\)$/) });
    expect(stdout).not.toContain(E2B_KEY);
  });

  it('fails naming perl and how to install it where perl is missing (every sandbox needs its helpers), and tries no sandbox; a missing skopeo fails nothing', async () => {
    const { code, stdout } = await withoutProgram(['perl', 'skopeo'], ['doctor', '--json']);
    const report = JSON.parse(stdout) as Report;
    const perl = report.checks.find((c) => c.name === 'perl');
    expect(perl).toMatchObject({ status: 'fail', fix: expect.stringMatching(/^perl is not installed: .*apt-get install perl-base/) });
    expect(report.checks.find((c) => c.name === 'sandbox')?.message).toMatch(/^not tried/);
    expect(report.checks.find((c) => c.name === 'skopeo')).toEqual({
      name: 'skopeo',
      status: 'ok',
      message: 'not installed (only template pull needs it: apt-get install skopeo)',
    });
    expect(report.checks.filter((c) => c.status === 'fail').map((c) => c.name)).toEqual(['perl', 'sandbox']);
    expect(code).toBe(1);
  });

  it('prints ok/warn/fail lines for people, ending in the verdict', async () => {
    const { code, stdout } = await doctor([]);
    const lines = stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^sandbox-mcp doctor \d+\.\d+\.\d+/);
    expect(lines.filter((l) => /^(ok|warn|fail) /.test(l)).length).toBeGreaterThanOrEqual(10);
    expect(lines.at(-1)).toBe('Local sandboxes work here.');
    expect(code).toBe(0);
  });

  it('fails with a useful line where SANDBOX_MCP_BWRAP names no executable, and tries no sandbox', async () => {
    const { code, stdout } = await doctor([], { SANDBOX_MCP_BWRAP: join(scratch, 'no-such-bwrap') });
    expect(code).toBe(1);
    expect(stdout).toMatch(/^fail +bubblewrap +SANDBOX_MCP_BWRAP does not name an executable file$/m);
    expect(stdout).toMatch(/fix: point SANDBOX_MCP_BWRAP at the bwrap binary/);
    // No bwrap was found, so none can be called too old (the limits line once said so, with an upgrade as the fix).
    expect(stdout).not.toMatch(/older than 0\.7|version 0\.7 or later/);
    expect(stdout).toMatch(/^fail +sandbox +not tried/m);
    expect(stdout.trimEnd().split('\n').at(-1)).toBe('Local sandboxes cannot work here until the failures above are fixed.');
  });

  it('fails naming the install fix where bubblewrap is not installed at all, and tries no sandbox', async () => {
    const { code, stdout, stderr } = await withoutBubblewrap(['doctor']);
    expect(stderr).toBe('');
    expect(code).toBe(1);
    expect(stdout).toMatch(/^fail +bubblewrap +bubblewrap \(bwrap\) is not installed: not on PATH nor in the system directories$/m);
    expect(stdout).toMatch(/fix: install bubblewrap: apt-get install bubblewrap \(Debian\/Ubuntu\), dnf install bubblewrap/);
    expect(stdout).not.toContain('SANDBOX_MCP_BWRAP');
    expect(stdout).not.toMatch(/older than 0\.7|version 0\.7 or later/);
    expect(stdout).toMatch(/^fail +sandbox +not tried/m);
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
    // Not installed at all: the same line names the install fix. The server still starts and
    // ends at its stdin's EOF.
    const absent = await withoutBubblewrap([]);
    expect(absent.code).toBe(0);
    expect(warningsIn(absent.stderr)).toEqual([
      'sandbox-mcp: warning: the local provider cannot work here: bubblewrap (bwrap) is not installed: install it ' +
        '(apt-get install bubblewrap, dnf install bubblewrap) and retry. Run `sandbox-mcp doctor` for every check.',
    ]);

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

  // A server that is not root here (cgroup v1) can make no memory cgroup: the memory limits it is
  // configured with hold nowhere, and it says so once at start-up; the doctor says the same. Named
  // after the situation it covered; where such a server can make one, it must stay quiet instead.
  if (nobodySituation && !nobodySituation.controllers.memory) {
    it(`${nobodySituation.name}: a server that cannot enforce its memory limits says so at start-up, naming them; so does its doctor`, async () => {
      const { server, env, state } = await nobodyServer();
      try {
        await ok(server.client, 'list_sandboxes', {});
        const [line] = await waitFor(() => {
          const found = warningsIn(server.stderr());
          return found.length > 0 ? found : null;
        }, 'the start-up warning');
        expect(line).toMatch(/^sandbox-mcp: warning: local sandboxes get no memory limit here: no memory cgroup can be made \(not root, /);
        expect(line).toContain('--sandbox-memory 512');
        expect(line).toContain('not enforced');
        expect(line).toContain('Delegate=yes');
        expect(warningsIn(server.stderr())).toHaveLength(1);
      } finally {
        await server.close();
      }
      const limits = (await doctorAs(NOBODY, env)).checks.find((c) => c.name === 'resource limits')!;
      expect(limits.status).toBe('warn');
      expect(limits.fix).toContain('512 MB per sandbox');
      expect(limits.fix).toContain('not enforced');
      await destroyStateDir(state);
    });
  } else if (nobodySituation) {
    it(`${nobodySituation.name}: a server that is not root but can make memory cgroups gives no memory warning`, async () => {
      const { server, state } = await nobodyServer();
      try {
        await ok(server.client, 'create_sandbox', { memory: 64 });
        expect(warningsIn(server.stderr())).toEqual([]);
      } finally {
        await server.close();
        await destroyStateDir(state);
      }
    });
  }

  it('names a state directory others may write (where every local call fails), and the server still starts', async () => {
    const open = join(scratch, 'open-state');
    mkdirSync(open);
    chmodSync(open, 0o777);
    const server = await connectStdio({ SANDBOX_MCP_STATE_DIR: open });
    try {
      // What the line warns of: the provider refuses the directory.
      expect((await toolError(server.client, 'list_sandboxes', {})).category).toBe('permission_denied');
      const warnings = warningsIn(server.stderr());
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toContain('the local provider cannot work here: The state directory');
      expect(warnings[0]).toContain(`${open} (owner uid ${process.getuid!()}, mode 0777)`);
      expect(warnings[0]).toContain('others may write to it');
      expect(warnings[0]).toContain('sandbox-mcp doctor');
    } finally {
      await server.close();
    }
  });

  it('where AppArmor restricts user namespaces, tries one as the doctor does: names AppArmor when bwrap is refused, silent when allowed', async () => {
    // Ubuntu's refusal, as bwrap prints it; reachable by the probe's unprivileged uid when root.
    const dir = mkdtempSync(join(tmpdir(), 'sandbox-mcp-apparmor-'));
    chmodSync(dir, 0o755);
    const refused = join(dir, 'bwrap');
    writeFileSync(refused, "#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n", { mode: 0o755 });
    let tries = 0;
    const probes = (restricting: boolean) => ({
      isAppArmorRestrictingUserns: () => restricting,
      checkUserNamespaces: (...args: Parameters<typeof checkUserNamespaces>) => {
        tries++;
        return checkUserNamespaces(...args);
      },
    });
    try {
      const onUbuntu = loadConfig({ SANDBOX_MCP_STATE_DIR: stateDir, SANDBOX_MCP_BWRAP: refused });
      const line = await startupWarning(onUbuntu, probes(true));
      expect(line).toMatch(/^sandbox-mcp: warning: the local provider cannot work here: bwrap could not create a user namespace/);
      expect(line).toContain('setting up uid map: Permission denied');
      expect(line).toContain('AppArmor restricts unprivileged user namespaces (Ubuntu 23.10+)');
      expect(line).toMatch(/Run `sandbox-mcp doctor` for every check\.\n$/);
      expect(tries).toBe(1);
      // Without the switch no user namespace is tried at start (the cheap path), refusing bwrap or not.
      expect(await startupWarning(onUbuntu, probes(false))).toBeUndefined();
      expect(tries).toBe(1);
      // The switch on, but this machine's bwrap may make them (as a profile allowing userns would): silent.
      expect(await startupWarning(loadConfig({ SANDBOX_MCP_STATE_DIR: stateDir }), probes(true))).toBeUndefined();
      expect(tries).toBe(2);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
