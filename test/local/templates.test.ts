// A root of its own (issue 19), asserted from inside real sandboxes: what the base template shows of
// the host, and sandboxes on a template made here from a few host programs and their libraries (no
// node): root inside without the capabilities that could mount or leave the disk budget, a writable
// root for that sandbox alone within its budget, the agent running on the server's own node.
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AGENT_RUNTIME_DIR, agentRuntimeArgv } from '../../shared/agent-runtime.js';
import { createLocalProvider } from '../../host/providers/local/local-provider.js';
import { ID_BLOCK_CLAIMS_DIR, ID_BLOCK_SIZE } from '../../host/providers/local/rootfs/id-blocks.js';
import { liveWritableLayer } from '../../host/providers/local/rootfs/writable-layer.js';
import { readSpec } from '../../host/providers/local/sandbox/state-dir.js';
import { layerRoot } from '../../host/providers/local/templates/store.js';
import type { Provider } from '../../host/providers/provider.js';
import { AGENT_BUNDLE, KEEPER_SCRIPT, REPO } from '../support/paths.js';
import { isRootOrSkipping, requireSandboxes } from '../support/prerequisites.js';
import { destroyStateDir, tempStateDir } from '../support/state-dir.js';
import { BASIC_PROGRAMS, hostProgram, writeTestTemplate } from '../support/test-template.js';

const MIB = 1024 * 1024;
// The disk budget of these sandboxes: a template's root gets thirteen sixteenths (26 MiB), the agent's state and /dev/shm the rest.
const DISK_MB = 32;
const isRoot = process.getuid?.() === 0;

async function sh(provider: Provider, id: string, command: string): Promise<{ code: number | null; out: string; err: string }> {
  const r = await provider.exec(id, command, { timeoutS: 60 });
  return { code: r.exitCode, out: r.stdout.toString(), err: r.stderr.toString() };
}

describe('the base template: the host out of view', () => {
  const stateDir = tempStateDir();
  // A host directory the person chose to show, holding (as a person's home might) a server's directory.
  const shown = mkdtempSync(join(tmpdir(), 'sandbox-mcp-shown-'));
  const innerState = join(shown, 'state');
  let provider: Provider;
  let shownProvider: Provider;
  let id: string;

  beforeAll(async () => {
    requireSandboxes();
    chmodSync(shown, 0o755);
    writeFileSync(join(shown, 'data.txt'), 'shown to sandboxes\n');
    mkdirSync(innerState, { mode: 0o700 });
    provider = createLocalProvider({ stateDir, keeperScript: KEEPER_SCRIPT });
    shownProvider = createLocalProvider({ stateDir: innerState, keeperScript: KEEPER_SCRIPT, roBinds: [shown] });
    id = (await provider.create({ timeoutS: 120 })).sandbox_id;
  });

  afterAll(async () => {
    await provider?.kill(id).catch(() => undefined);
    await provider?.close();
    await destroyStateDir(stateDir);
    await destroyStateDir(innerState);
    rmSync(shown, { recursive: true, force: true });
  });

  it("shows /usr, the merged-/usr links and an /etc of what programs read, and no other host file (not even this checkout's)", async () => {
    const top = (await sh(provider, id, 'ls -A /')).out.trim().split('\n');
    const allowed = [
      'bin',
      'sbin',
      'lib',
      'lib32',
      'lib64',
      'libx32',
      'usr',
      'etc',
      'dev',
      'proc',
      'home',
      'tmp',
      'var',
      'run',
      '.sandbox-mcp',
    ];
    expect(top.filter((e) => !allowed.includes(e))).toEqual([]);
    expect(top).toEqual(expect.arrayContaining(['usr', 'etc', 'home', 'tmp', 'proc', 'dev']));
    // Host paths a newcomer's sandbox used to read; the checkout is outside /usr here.
    const hostPaths = ['/opt', '/srv', '/mnt', '/media', '/root', '/boot', '/var/lib', '/var/log', '/etc/shadow', '/etc/machine-id'];
    hostPaths.push('/etc/pip.conf', '/etc/npmrc', '/etc/gitconfig', '/etc/ssh/ssh_host_rsa_key', '/etc/ssl/private', '/etc/sudoers');
    if (!REPO.startsWith('/usr/')) hostPaths.push(REPO, join(REPO, 'package.json'));
    const seen = await sh(provider, id, hostPaths.map((p) => `[ -e '${p}' ] && echo '${p}'`).join('; ') + '; true');
    expect(seen.out).toBe('');
    // What programs need is there: their configuration, certificates, the loader's cache, the host's own
    // python and the agent's node, but the host name and users are the sandbox's.
    const needed = await sh(
      provider,
      id,
      'cat /etc/hostname; grep -c . /etc/passwd; for p in /etc/os-release /etc/ssl/certs /etc/ld.so.cache /etc/nsswitch.conf; do [ -e $p ] || echo missing $p; done; ' +
        "python3 -c 'import json, ssl; print(1)'; node -e 'console.log(6 * 7)'",
    );
    expect(needed).toMatchObject({ code: 0, err: '' });
    expect(needed.out).toBe('sandbox\n3\n1\n42\n');
    expect(readdirSync('/etc').length).toBeGreaterThan(Number((await sh(provider, id, 'ls -A /etc | wc -l')).out));
  });

  it('shows a path the person adds (--sandbox-ro-bind) read-only, and never the state directory below it', async () => {
    const sb = (await shownProvider.create({ timeoutS: 120 })).sandbox_id;
    try {
      const r = await sh(
        shownProvider,
        sb,
        `cat ${shown}/data.txt; touch ${shown}/new 2>&1; ls -A ${innerState} | wc -l; ls ${innerState}/local 2>&1`,
      );
      expect(r.out).toMatch(/^shown to sandboxes\n.*Read-only file system\n0\n.*No such file or directory\n$/s);
    } finally {
      await shownProvider.kill(sb);
    }
  });

  it('refuses new user namespaces inside (the disk budget holds against a private mount)', async () => {
    const r = await sh(provider, id, 'unshare -Ur true; echo "rc=$?"; unshare -U true; echo "rc=$?"; unshare -Urm true; echo "rc=$?"');
    expect(r.out).toBe('rc=1\nrc=1\nrc=1\n');
    expect(r.err).toMatch(/No space left on device/);
  });
});

describe(`a sandbox on a template (server ${isRoot ? 'as root' : 'not root'})`, () => {
  const stateDir = tempStateDir();
  const templatesDir = join(stateDir, 'templates');
  let provider: Provider;
  let first: string;
  let second: string;

  beforeAll(async () => {
    requireSandboxes();
    mkdirSync(templatesDir, { mode: 0o700 });
    writeTestTemplate(templatesDir, 'mini', { programs: BASIC_PROGRAMS, owners: isRoot ? 'native' : 'flattened' });
    provider = createLocalProvider({ stateDir, keeperScript: KEEPER_SCRIPT, limits: { diskMb: DISK_MB } });
    first = (await provider.create({ template: 'mini', timeoutS: 300 })).sandbox_id;
    second = (await provider.create({ template: 'mini', timeoutS: 300 })).sandbox_id;
  });

  afterAll(async () => {
    for (const id of [first, second]) await provider?.kill(id).catch(() => undefined);
    await provider?.close();
    await destroyStateDir(stateDir);
  });

  it('runs as root of its own user namespace, without a capability that could mount; get_sandbox and list name the template', async () => {
    const r = await sh(
      provider,
      first,
      'id -u; grep -E "^Cap(Eff|Bnd)|^NoNewPrivs" /proc/self/status; ls /home; command -v node || echo no node',
    );
    expect(r.code).toBe(0);
    const [uid, capEff, capBnd, noNewPrivs, ...rest] = r.out.trim().split('\n');
    expect(uid).toBe('0');
    const sysAdmin = 1n << 21n;
    for (const line of [capEff!, capBnd!]) expect(BigInt('0x' + line.split(/\s+/)[1]) & sysAdmin).toBe(0n);
    expect(noNewPrivs).toMatch(/NoNewPrivs:\s+1/);
    expect(rest).toEqual(['user', 'no node']);
    expect((await provider.getInfo(first)).template).toBe('mini');
    expect((await provider.list({ limit: 10, offset: 0 })).map((m) => m.template)).toEqual(['mini', 'mini']);
    expect(readSpec(join(stateDir, 'local', first))?.template).toBe('mini');
  });

  it('cannot make a user namespace, nor mount a tmpfs of its own', async () => {
    const r = await sh(
      provider,
      first,
      'unshare -Ur true; echo "rc=$?"; unshare -U true; echo "rc=$?"; mkdir -p /mnt; mount -t tmpfs t /mnt; echo "rc=$?"; grep -c " /mnt " /proc/self/mountinfo',
    );
    expect(r.out).toBe('rc=1\nrc=1\nrc=32\n0\n');
    expect(r.err).toMatch(/No space left on device/);
  });

  it("keeps writes in the sandbox's writable layer, within its disk budget; another sandbox on the template sees none of them", async () => {
    // Up to twice the whole budget under /usr, then a byte each in /etc, /home/user and /tmp, which share it.
    const fill = await sh(
      provider,
      first,
      `head -c ${2 * DISK_MB * MIB} /dev/zero > /usr/lib/fill; stat -c %s /usr/lib/fill; ` +
        'echo x > /tmp/t; echo "tmp rc=$?"; rm /usr/lib/fill; echo changed > /etc/marker && echo y > /home/user/h && echo z > /tmp/t && echo written',
    );
    const written = Number(fill.out.split('\n')[0]);
    expect(written).toBeLessThanOrEqual((DISK_MB * MIB * 13) / 16);
    expect(written).toBeGreaterThan((DISK_MB * MIB * 13) / 16 - 2 * MIB);
    expect(fill.err).toMatch(/No space left on device/);
    expect(fill.out).toMatch(/tmp rc=1\nwritten\n$/);
    // The other sandbox on the same template, and the template itself, are untouched.
    const other = await sh(provider, second, 'ls /etc/marker /home/user/h /tmp/t /usr/lib/fill 2>&1 | grep -c "No such file"');
    expect(other.out).toBe('4\n');
    const record = JSON.parse(readFileSync(join(templatesDir, 'mini.json'), 'utf8')) as { layers: string[] };
    expect(existsSync(join(layerRoot(templatesDir, record.layers[0]!), 'etc/marker'))).toBe(false);
    // The host reads the layer while the sandbox runs (what a snapshot copies).
    const layer = liveWritableLayer(join(stateDir, 'local', first));
    expect(layer).not.toBeNull();
    expect(readFileSync(join(layer!.upperDir, 'etc/marker'), 'utf8')).toBe('changed\n');
    expect(readFileSync(join(layer!.upperDir, 'home/user/h'), 'utf8')).toBe('y\n');
    expect(liveWritableLayer(join(stateDir, 'local', 'nosuchsandbx'))).toBeNull();
  });

  it("runs the agent on the server's node, bound read-only, though the template has none: its selftest passes", async () => {
    await provider.writeFile(first, 'agent.cjs', readFileSync(AGENT_BUNDLE));
    const r = await sh(
      provider,
      first,
      `${agentRuntimeArgv(['agent.cjs', 'selftest']).join(' ')}; touch ${AGENT_RUNTIME_DIR}/x; mv /.sandbox-mcp /moved`,
    );
    const result = JSON.parse(r.out) as { ok: boolean; checks: { name: string; ok: boolean }[] };
    expect(result.checks.filter((c) => !c.ok)).toEqual([]);
    expect(result.ok).toBe(true);
    expect(r.err).toMatch(/Read-only file system[\s\S]*(busy|Read-only)/);
  });

  it.skipIf(!isRootOrSkipping('the id blocks of template sandboxes'))(
    'as root, gives each sandbox a block of host ids of its own, claimed until it ends',
    async () => {
      const maps = await Promise.all(
        [first, second].map(async (id) => (await sh(provider, id, 'cat /proc/self/uid_map')).out.trim().split(/\s+/)),
      );
      for (const [inside, , count] of maps) expect([inside, count]).toEqual(['0', String(ID_BLOCK_SIZE)]);
      expect(maps[0]![1]).not.toBe(maps[1]![1]);
      const third = (await provider.create({ template: 'mini', timeoutS: 60 })).sandbox_id;
      // The claims are the machine's: a sandbox of the other test worker may give its claim back
      // between the listing and the read (a claim gone meanwhile is not this sandbox's).
      const claim = (dir: string) =>
        readdirSync(ID_BLOCK_CLAIMS_DIR).find((k) => {
          try {
            return readFileSync(join(ID_BLOCK_CLAIMS_DIR, k), 'utf8') === dir;
          } catch (e) {
            if ((e as NodeJS.ErrnoException).code === 'ENOENT') return false;
            throw e;
          }
        });
      const thirdDir = join(stateDir, 'local', third);
      expect(claim(thirdDir)).toBeDefined();
      await provider.kill(third);
      expect(claim(thirdDir)).toBeUndefined();
    },
  );

  it("refuses an unknown template as not_found naming `template`, and lists the server's templates", async () => {
    for (const template of ['nosuch', 'Not A Name', '../mini']) {
      await expect(provider.create({ template })).rejects.toMatchObject({
        category: 'not_found',
        message: expect.stringMatching(/^template: /),
      });
    }
    expect(provider.templateNames?.()).toEqual(['mini']);
  });
});

describe('sandboxes on roots with only a shell, or coreutils without dirname (issue 37)', () => {
  const stateDir = tempStateDir();
  const templatesDir = join(stateDir, 'templates');
  let provider: Provider;
  let shellOnly: string;
  let noDirname: string;

  beforeAll(async () => {
    requireSandboxes();
    mkdirSync(templatesDir, { mode: 0o700 });
    const owners = isRoot ? 'native' : 'flattened';
    // sh and the libraries it links, nothing else: no sleep, cat, stat, mv or dirname.
    writeTestTemplate(templatesDir, 'shell-only', { programs: [hostProgram('sh')], owners });
    writeTestTemplate(templatesDir, 'no-dirname', { programs: BASIC_PROGRAMS.filter((p) => !p.endsWith('/dirname')), owners });
    // A file operation that loops is cut off long before the default two minutes (and fails the test as a timeout).
    // No resident: these are the scripts' paths (a resident's own file operations need no program: e2e/minimal-roots).
    provider = createLocalProvider({
      stateDir,
      keeperScript: KEEPER_SCRIPT,
      limits: { diskMb: DISK_MB },
      fileOpTimeoutMs: 15_000,
      residentAgent: false,
    });
    const ids = await Promise.all(
      ['shell-only', 'no-dirname'].map(async (template) => (await provider.create({ template, timeoutS: 300 })).sandbox_id),
    );
    [shellOnly, noDirname] = [ids[0]!, ids[1]!];
  });

  afterAll(async () => {
    for (const id of [shellOnly, noDirname]) if (id) await provider?.kill(id).catch(() => undefined);
    await provider?.close();
    await destroyStateDir(stateDir);
  });

  it('pid 1 waits on two blocked shells, not on a loop of sleeps that cannot start; commands run', async () => {
    // Commands run: their environment is read with the shell's own `read` (no cat).
    const probe = await sh(provider, shellOnly, 'echo "$HOME"; command -v sleep cat dirname; echo "none: $?"');
    expect(probe).toMatchObject({ code: 0, out: expect.stringMatching(/^\/home\/user\nnone: [1-9]\d*\n$/) });
    // pid 1's children, by their /proc/PID/stat (comm and state), read with builtins alone.
    const children = await sh(
      provider,
      shellOnly,
      'for d in /proc/[0-9]*; do read -r s < "$d/stat" 2>/dev/null || continue; set -- $s; [ "$4" = 1 ] && echo "$2 $3"; done',
    );
    expect(children.out.trim().split('\n').sort()).toEqual(['(sh) S', '(sh) T']);
  });

  it('a file operation that needs a missing program fails at once, naming it', async () => {
    await expect(provider.writeFile(shellOnly, 'a/b.txt', Buffer.from('x'))).rejects.toMatchObject({
      category: 'unsupported',
      message: expect.stringMatching(/has no `stat`/),
    });
    await expect(provider.readFile(shellOnly, '/etc/passwd')).rejects.toMatchObject({ category: 'unsupported' });
    await expect(provider.listFiles(shellOnly, '/', { depth: 1, maxEntries: 10 })).rejects.toMatchObject({
      category: 'unsupported',
      message: expect.stringMatching(/has no `find`/),
    });
  });

  it('writes a file into new directories without dirname (the parent found by the shell alone)', async () => {
    await provider.writeFile(noDirname, 'deep/er/file.txt', Buffer.from('kept\n'));
    await provider.writeFile(noDirname, '/tmp/top.txt', Buffer.from('top\n'));
    expect((await provider.readFile(noDirname, 'deep/er/file.txt')).data.toString()).toBe('kept\n');
    expect((await provider.readFile(noDirname, '/tmp/top.txt')).data.toString()).toBe('top\n');
    // A parent that cannot be made (a file on the way) is still told apart from a missing permission.
    await expect(provider.writeFile(noDirname, 'deep/er/file.txt/x', Buffer.from('x'))).rejects.toMatchObject({
      category: 'invalid_argument',
    });
  });
});
