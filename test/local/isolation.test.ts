// Isolation of local sandboxes, each property asserted from inside a real sandbox.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocalProvider } from '../../host/providers/local/local-provider.js';
import type { Provider } from '../../host/providers/provider.js';
import { readKeeperRecord, readSpec, RESIDENT_FILE } from '../../host/providers/local/sandbox/state-dir.js';
import type { ResidentRecord } from '../../host/providers/local/keeper/resident.js';
import { ProviderError } from '../../host/providers/provider-error.js';
import { waitFor } from '../support/wait.js';
import { cleanNodeEnv } from '../support/local-sandboxes.js';
import { FIXTURES, KEEPER_SCRIPT } from '../support/paths.js';
import { isRootOrSkipping, requireSandboxes } from '../support/prerequisites.js';
import { destroyStateDir, tempStateDir } from '../support/state-dir.js';

describe('local sandbox isolation', () => {
  const stateDir = tempStateDir();
  let provider: Provider;
  let id: string;
  let hostSleeper: ChildProcess;
  const marker = String(900_000 + Math.floor(Math.random() * 99_999));

  const sh = async (command: string) => {
    const r = await provider.exec(id, command, { timeoutS: 30 });
    return { code: r.exitCode, out: r.stdout.toString(), err: r.stderr.toString() };
  };

  const hostSecret = `host-secret-${marker}`;
  const residentRecord = (sandboxId: string) =>
    JSON.parse(readFileSync(join(stateDir, 'local', sandboxId, RESIDENT_FILE), 'utf8')) as ResidentRecord;

  beforeAll(async () => {
    requireSandboxes();
    // The server's own environment (API keys…) must never reach a sandbox.
    process.env.SANDBOX_MCP_PROBE_API_KEY = hostSecret;
    provider = createLocalProvider({ stateDir: stateDir, keeperScript: KEEPER_SCRIPT });
    id = (await provider.create({ timeoutS: 120 })).sandbox_id;
    hostSleeper = spawn('sleep', [marker], { stdio: 'ignore' });
  });

  afterAll(async () => {
    delete process.env.SANDBOX_MCP_PROBE_API_KEY;
    hostSleeper?.kill('SIGKILL');
    await provider.kill(id).catch(() => {});
    await provider.close();
    await destroyStateDir(stateDir);
  });

  it('cannot see host processes', async () => {
    expect(hostSleeper.pid).toBeDefined();
    const r = await sh('for p in /proc/[0-9]*; do tr "\\0" " " < $p/cmdline; echo; done');
    expect(r.code).toBe(0);
    expect(r.out).not.toContain(marker);
    // Only pid 1 (the keep-alive loop), its sleep and this command's own processes exist.
    const pids = r.out.trim().split('\n').length;
    expect(pids).toBeLessThan(10);
    const one = await sh('tr "\\0" " " < /proc/1/cmdline');
    expect(one.out).toContain('while :; do if [ $w = sleep ]; then sleep 86400 & wait $!;');
  });

  it("cannot see the host's /home and /root", async () => {
    const r = await sh('ls -A /root; echo ---; ls -A /home');
    expect(r.code).toBe(0);
    expect(r.out).toBe('---\nuser\n');
    // Whatever the host has there stays invisible (the host's /root is never empty of its own files here).
    const hostRoot = existsSync('/root') ? readdirSync('/root') : [];
    for (const name of hostRoot) expect(r.out).not.toContain(name);
  });

  it('cannot write /usr or /etc', async () => {
    const r = await sh('touch /usr/sandbox-probe; echo $?; echo x > /etc/sandbox-probe; echo $?; mkdir /etc/probe-dir; echo $?');
    expect(r.out.trim().split('\n')).toEqual(['1', '1', '1']);
    expect(existsSync('/usr/sandbox-probe') || existsSync('/etc/sandbox-probe')).toBe(false);
    await expect(provider.writeFile(id, '/usr/sandbox-probe', Buffer.from('x'))).rejects.toMatchObject({ category: 'permission_denied' });
  });

  it("never sees the server's environment (pid 1 or commands)", async () => {
    const r = await sh('tr "\\0" "\\n" < /proc/1/environ; env');
    expect(r.code).toBe(0);
    expect(r.out).toContain('HOME=/home/user');
    expect(r.out).not.toContain(hostSecret);
  });

  it('cannot write /sys or /proc/sys', async () => {
    const r = await sh('echo 1 > /proc/sys/kernel/ns_last_pid; echo $?; echo never > /sys/kernel/mm/transparent_hugepage/enabled; echo $?');
    expect(r.out).toBe('1\n1\n');
  });

  it('cannot remount / read-write', async () => {
    const r = await sh('mount -o remount,rw / 2>/dev/null; echo $?; touch /sandbox-probe 2>/dev/null; echo $?');
    expect(
      r.out
        .trim()
        .split('\n')
        .map(Number)
        .every((c) => c !== 0),
    ).toBe(true);
  });

  it('runs without capabilities, as the unprivileged sandbox user', async () => {
    const r = await sh('grep CapEff /proc/self/status; grep CapEff /proc/1/status; whoami; echo $HOME');
    expect(r.out).toBe('CapEff:\t0000000000000000\nCapEff:\t0000000000000000\nuser\n/home/user\n');
    if (process.getuid?.() === 0) expect((await sh('id -u')).out.trim()).not.toBe('0');
  });

  it('does not take host-owned files for its own (unmapped owners show as nobody)', async () => {
    const r = await sh('test -O /usr; echo $?; stat -c %U /usr; id -un');
    expect(r.out).toBe('1\nnobody\nuser\n');
  });

  it.runIf(isRootOrSkipping('the per-sandbox uid tests'))(
    'as root, runs under a uid of its own: no other sandbox or host nobody process can signal it',
    async () => {
      const other = await provider.create({ timeoutS: 60 });
      try {
        const dirOf = (sid: string) => join(stateDir, 'local', sid);
        const mine = readSpec(dirOf(id))!.identity;
        const theirs = readSpec(dirOf(other.sandbox_id))!.identity;
        expect(mine.uid).not.toBe(theirs.uid);
        for (const uid of [mine.uid, theirs.uid]) expect([0, 65534]).not.toContain(uid);
        expect((await sh('id -u')).out.trim()).toBe(String(mine.uid));
        // The kernel's own check: a process with the other sandbox's uid, or nobody's, may not signal this pid 1.
        const pid1 = readKeeperRecord(dirOf(id))!.pid1.pid;
        expect(readFileSync(`/proc/${pid1}/status`, 'utf8')).toMatch(new RegExp(`\\nUid:\\t${mine.uid}\\t`));
        // The shell's kill builtin: /bin/kill (procps) is not on every machine.
        const canSignal = (uid: number) => spawnSync('/bin/sh', ['-c', `kill -0 ${pid1}`], { uid, gid: uid, stdio: 'ignore' }).status === 0;
        expect([canSignal(theirs.uid), canSignal(65534), canSignal(mine.uid)]).toEqual([false, false, true]);
      } finally {
        await provider.kill(other.sandbox_id);
      }
    },
  );

  it("the caller's environment applies inside only: the host-side helpers' loader never sees it", async () => {
    const probe = `ld-probe-${marker}`;
    const r = await provider.exec(id, `/bin/true; ls /tmp | grep -q ${probe} && echo logged; printf %s "$ODD"`, {
      timeoutS: 30,
      envs: { LD_DEBUG: 'files', LD_DEBUG_OUTPUT: `/tmp/${probe}`, ODD: 'it\'s $(id) `x` \\ \n"end"' },
    });
    // Inside, the loader obeyed them (its log landed in the sandbox's /tmp) and odd values arrive intact…
    expect(r.stdout.toString()).toBe(`logged\nit's $(id) \`x\` \\ \n"end"`);
    // …while nsenter, which runs on the host, neither logged to the host's /tmp nor to the command's stderr.
    expect(readdirSync(tmpdir()).filter((n) => n.startsWith(probe))).toEqual([]);
    expect(r.stderr.toString()).not.toContain('nsenter');
  });

  it('no descriptor the server inherited (a host socket here) reaches pid 1 or a command', async () => {
    const script = join(stateDir, 'fd-probe.mjs');
    await build({
      entryPoints: [join(FIXTURES, 'fd-probe.ts')],
      bundle: true,
      platform: 'node',
      format: 'esm',
      outfile: script,
      logLevel: 'silent',
    });
    // The server process inherits a socket of ours as fd 100 without close-on-exec (node itself
    // marks low inherited descriptors close-on-exec, not all of them).
    const child = spawn('/bin/bash', ['-c', 'exec 100<&5 5<&-; exec "$@"', 'bash', process.execPath, script, stateDir, KEEPER_SCRIPT], {
      env: cleanNodeEnv(),
      stdio: ['ignore', 'pipe', 'inherit', 'ignore', 'ignore', 'pipe'],
    });
    let out = '';
    child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(code).toBe(0);
    // pid 1's is covered with /dev/null; a command's is /dev/null too (entered with nsenter), or
    // closed (spawned by the sandbox's resident agent, which closes what it inherited): never the socket.
    const { exitCode, out: lines } = JSON.parse(out) as { exitCode: number; out: string };
    expect(exitCode).toBe(0);
    expect(lines.split('\n').slice(0, 2)).toEqual(['/dev/null', expect.stringMatching(/^(\/dev\/null|closed)$/)]);
  });

  it("has its own /tmp, not the host's", async () => {
    const hostDir = mkdtempSync(join(tmpdir(), 'host-only-'));
    try {
      const r = await sh(`test -e /tmp/${basename(hostDir)}; echo $?; echo inside > /tmp/inside-probe-${marker}; echo $?`);
      expect(r.out).toBe('1\n0\n');
      expect(existsSync(`/tmp/inside-probe-${marker}`)).toBe(false);
    } finally {
      rmSync(hostDir, { recursive: true, force: true });
    }
  });

  it("cannot see the provider's state directory", async () => {
    const r = await sh(`test -e ${stateDir}/local/${id}/spec.json; echo $?`);
    expect(r.out).toBe('1\n');
  });

  it('resolves file paths in the sandbox view: symlinks cannot reach host files', async () => {
    const hostDir = mkdtempSync(join(tmpdir(), 'host-secret-'));
    const secret = join(hostDir, 'secret.txt');
    writeFileSync(secret, 'host only');
    try {
      await sh(`ln -s ${secret} /home/user/link; ln -s ${hostDir} /home/user/dirlink`);
      await expect(provider.readFile(id, 'link')).rejects.toMatchObject({ category: 'not_found' });
      await expect(provider.listFiles(id, 'dirlink', { depth: 1, maxEntries: 10 })).rejects.toMatchObject({ category: 'not_found' });
      // The link's target directory does not exist in the sandbox's view…
      await expect(provider.writeFile(id, 'link', Buffer.from('x'))).rejects.toMatchObject({ category: 'not_found' });
      // …and once made there, writing through the link lands in the sandbox's own /tmp, never on the host.
      await sh(`mkdir -p ${hostDir}`);
      await provider.writeFile(id, 'link', Buffer.from('from sandbox'));
      expect(readFileSync(secret, 'utf8')).toBe('host only');
      expect((await provider.readFile(id, secret)).data.toString()).toBe('from sandbox');
    } finally {
      rmSync(hostDir, { recursive: true, force: true });
    }
  });

  it('survives kill -9 -1 and pkill from inside (pid 1 is protected); the resident agent it killed comes back', async () => {
    const restartsBefore = residentRecord(id).restarts;
    // The command kills the sandbox's resident agent too, which was running it: its outcome may be lost.
    const killed = await sh('kill -9 -1; pkill -9 sleep; true').catch((e: ProviderError) => e);
    if (killed instanceof ProviderError) expect(killed).toMatchObject({ category: 'unavailable', code: 'agent_lost' });
    const r = await sh('echo still here');
    expect(r.out).toBe('still here\n');
    expect((await provider.getInfo(id)).status).toBe('running');
    // The keeper started the resident again, and it answers.
    await waitFor(() => residentRecord(id).resident !== null && residentRecord(id).restarts > restartsBefore, 'the resident to be back');
    const channel = await provider.agentChannel!(id);
    expect(channel?.hello.resident).toBe(true);
  });

  it('runs node', async () => {
    const r = await sh('node -e "console.log(6 * 7)"');
    expect(r).toMatchObject({ code: 0, out: '42\n' });
  });
});
