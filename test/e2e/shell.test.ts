// `sandbox-mcp shell` through the BUILT bin, driven from a pseudo-terminal the test opens with
// node-pty (the "person's terminal"), into real local sandboxes and the e2b fake: the program
// inside gets a fresh terminal of its own (never the person's), run_command's user and
// environment, window-size changes, raw mode that is restored however the CLI ends, and the
// program's exit status.
import { spawn as spawnPty, type IPty } from '@lydell/node-pty';
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocalProvider } from '../../host/providers/local/local-provider.js';
import type { Provider } from '../../host/providers/provider.js';
import { startFakeE2b, type FakeE2b } from '../e2b-fake/index.js';
import { connectStdio, ok, serverEnv } from '../support/built-server.js';
import { HOST_JS } from '../support/paths.js';
import { requireSandboxes } from '../support/prerequisites.js';
import { destroyStateDir, tempStateDir } from '../support/state-dir.js';
import { waitFor } from '../support/wait.js';

const stateDir = tempStateDir();
let provider: Provider;
let sandboxId: string;

/** The person's terminal: a pty running `file args`, everything it shows collected. */
interface Terminal {
  term: IPty;
  /** The device of this terminal on the host (/dev/pts/N). */
  device: string;
  output(): string;
  /** Waits until the output matches `re` (after `from`), returning the match. */
  expect(re: RegExp, from?: number): Promise<RegExpExecArray>;
  type(text: string): void;
  exited: Promise<number>;
}

function openTerminal(file: string, args: string[], env: Record<string, string> = {}): Terminal {
  const term = spawnPty(file, args, {
    cols: 100,
    rows: 30,
    env: serverEnv({ SANDBOX_MCP_STATE_DIR: stateDir, TERM: 'xterm', ...env }),
  });
  let out = '';
  term.onData((d) => (out += d));
  const exited = new Promise<number>((resolve) => term.onExit(({ exitCode }) => resolve(exitCode)));
  return {
    term,
    device: (term as unknown as { ptsName: string }).ptsName,
    output: () => out,
    async expect(re, from = 0) {
      let m: RegExpExecArray | null = null;
      await waitFor(() => (m = re.exec(out.slice(from))) !== null, `terminal output matching ${re}`);
      return m!;
    },
    type: (text) => term.write(text),
    exited,
  };
}

const shell = (id: string, extra: string[] = [], env: Record<string, string> = {}) =>
  openTerminal(process.execPath, [HOST_JS, 'shell', id, ...extra], env);

/**
 * Runs `cmd` in the shell and returns what it printed after `marker=`. The typed line is echoed
 * too, so the marker is typed split by '' (M''ARKER): only the command's output holds it whole.
 */
async function ask(t: Terminal, marker: string, cmd: string): Promise<string> {
  const from = t.output().length;
  t.type(`echo ${marker.slice(0, 1)}''${marker.slice(1)}=${cmd}\r`);
  return (await t.expect(new RegExp(`${marker}=([^\\r\\n]*)\\r*\\n`), from))[1]!;
}

/**
 * Runs the shell with no terminal at all: stdin /dev/null (`input` undefined) or a pipe that
 * carries `input` and ends. Resolves with its exit status and output once it exits, or with
 * `code: 'running'` when it is still running after a bound (then it is killed).
 */
async function shellWithoutTerminal(
  id: string,
  input: string | undefined,
  env: Record<string, string> = {},
): Promise<{ code: number | null | 'running'; stdout: string }> {
  const child = spawn(process.execPath, [HOST_JS, 'shell', id], {
    env: serverEnv({ SANDBOX_MCP_STATE_DIR: stateDir, ...env }),
    stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
  let code: number | null | undefined;
  child.once('exit', (c, signal) => (code = signal ? null : c));
  if (input !== undefined) child.stdin!.end(input);
  try {
    await waitFor(() => code !== undefined, 'the shell to end with its input');
  } catch {
    child.kill('SIGKILL');
    return { code: 'running', stdout };
  }
  return { code: code!, stdout };
}

beforeAll(async () => {
  requireSandboxes();
  provider = createLocalProvider({ stateDir });
  sandboxId = (await provider.create({ timeoutS: 900, envs: { GREETING: 'hello-env' } })).sandbox_id;
});
afterAll(async () => {
  await provider?.close();
  await destroyStateDir(stateDir);
});

describe('shell into a local sandbox', () => {
  it('gives the shell a fresh terminal of its own, as run_command user and environment; exit 3 ends the CLI with 3', async () => {
    const t = shell(`local:${sandboxId}`);
    const tty = await ask(t, 'TTY', '$(tty)');
    expect(tty).toMatch(/^\/dev\/pts\/\d+$/);
    // Not the person's terminal: a different device, and the person's is nowhere inside.
    expect(tty).not.toBe(t.device);
    const hostN = t.device.replace('/dev/pts/', '');
    expect(await ask(t, 'REACH', `$([ -e ${t.device} ] && echo yes || echo no)`)).toBe('no');
    expect(await ask(t, 'PTS', '$(ls /dev/pts | tr "\\n" ,)')).toBe(`${tty.replace('/dev/pts/', '')},`);
    expect(await ask(t, 'HELD', `$(for f in /proc/[0-9]*/fd/*; do readlink $f; done 2>/dev/null | grep -c "^/dev/pts/${hostN}$")`)).toBe(
      '0',
    );
    // Its controlling terminal (tty_nr, field 7 of stat) is that fresh one: major 136, minor N.
    const minor = Number(tty.replace('/dev/pts/', ''));
    expect(await ask(t, 'CTTY', "$(awk '{print $7}' /proc/self/stat)")).toBe(String(136 * 256 + minor));

    expect(await ask(t, 'MATH', '$((6*7))')).toBe('42');
    const execd = await provider.exec(sandboxId, 'echo "$(id -u):$(id -g):$(whoami):$HOME:$PATH:$GREETING:$PWD"', { timeoutS: 30 });
    expect(await ask(t, 'WHO', '"$(id -u):$(id -g):$(whoami):$HOME:$PATH:$GREETING:$PWD"')).toBe(execd.stdout.toString().trim());
    // Within the sandbox's limits, as run_command is: its rlimits and cgroups.
    const bounds =
      '$(grep -E "^Max (processes|open files|core)" /proc/self/limits | tr -s " " | tr "\\n" ,)$(grep -c sandbox-mcp- /proc/self/cgroup)';
    const execBounds = await provider.exec(sandboxId, `echo "${bounds}"`, { timeoutS: 30 });
    expect(execBounds.stdout.toString()).toMatch(/Max processes \d+ \d+ processes/);
    expect(await ask(t, 'BOUNDS', `"${bounds}"`)).toBe(execBounds.stdout.toString().trim());

    t.type('exit 3\r');
    expect(await t.exited).toBe(3);
  });

  it('gives the shell the proxy variables of a sandbox with an allow-list, as run_command has them', async () => {
    const listed = (await provider.create({ timeoutS: 300, network: { allowOut: ['pypi.org'] } })).sandbox_id;
    try {
      const probe = '"$(env | grep -i _proxy= | LC_ALL=C sort | tr "\\n" ,)"';
      const execd = (await provider.exec(listed, `echo ${probe}`, { timeoutS: 30 })).stdout.toString().trim();
      expect(execd).toContain('HTTPS_PROXY=http://127.0.0.1:');
      expect(execd).toContain('no_proxy=');
      const t = shell(listed);
      expect(await ask(t, 'PXY', probe)).toBe(execd);
      t.type('exit\r');
      expect(await t.exited).toBe(0);
    } finally {
      await provider.kill(listed);
    }
  });

  it('follows the window size', async () => {
    const t = shell(sandboxId);
    expect(await ask(t, 'SIZE', '$(stty size)')).toBe('30 100');
    t.term.resize(120, 40);
    // The CLI hears SIGWINCH asynchronously: ask until the new size arrives (a bound, not a timing).
    await waitFor(async () => (await ask(t, 'SIZE', '$(stty size)')) === '40 120', 'the new size inside');
    t.type('exit\r');
    expect(await t.exited).toBe(0);
  });

  it('runs a program after -- instead of the shell, with its exit status', async () => {
    const t = shell(sandboxId, ['--', '/bin/sh', '-c', 'echo "P=$(tty)"; exit 5']);
    expect((await t.expect(/P=(\/dev\/pts\/\d+)/))[1]).toMatch(/^\/dev\/pts\/\d+$/);
    expect(await t.exited).toBe(5);
  });

  it('puts the person terminal in raw mode and restores it on every way out', async () => {
    const wrapper = (id: string) =>
      openTerminal('/bin/sh', ['-c', '"$0" "$1" shell "$2"; echo "CLI_EXIT=$?"; stty -a; echo STTY_DONE', process.execPath, HOST_JS, id]);
    const cooked = (out: string) => {
      const flags = out.slice(out.indexOf('CLI_EXIT='));
      return /(^|\s)icanon(\s|;|$)/m.test(flags) && /(^|\s)echo(\s|;|$)/m.test(flags);
    };

    // Raw: Ctrl-C reaches the shell inside (it interrupts sleep) instead of ending the CLI.
    const a = wrapper(sandboxId);
    await ask(a, 'READY', 'yes');
    const from = a.output().length;
    a.type("echo S''LEEPING; sleep 600\r");
    await a.expect(/SLEEPING\r*\n/, from);
    a.type('\x03');
    expect(await ask(a, 'AFTER', 'interrupted')).toBe('interrupted');
    a.type('exit 3\r');
    await a.exited;
    // The pty may report the exit before the last of its output: stty's lines end with the marker.
    await a.expect(/STTY_DONE/);
    expect(a.output()).toMatch(/CLI_EXIT=3\r*\n/);
    expect(cooked(a.output())).toBe(true);

    // The sandbox killed under the shell: the CLI ends too, the terminal cooked again.
    const doomed = (await provider.create({ timeoutS: 300 })).sandbox_id;
    const b = wrapper(doomed);
    await ask(b, 'READY', 'yes');
    await provider.kill(doomed);
    await b.exited;
    await b.expect(/STTY_DONE/);
    expect(b.output()).toMatch(/CLI_EXIT=(\d+)/);
    expect(b.output()).not.toMatch(/CLI_EXIT=0\r*\n/);
    expect(cooked(b.output())).toBe(true);
  });

  it('ends when its input ends, with no terminal: < /dev/null, and piped commands run first', async () => {
    expect(await shellWithoutTerminal(sandboxId, undefined)).toMatchObject({ code: 0 });
    const piped = await shellWithoutTerminal(sandboxId, "echo PI''PED=$((6*7))\n");
    expect(piped.code).toBe(0);
    expect(piped.stdout).toMatch(/PIPED=42\r?\n/);
  });

  it('names the sandbox that is not there, and exits 1', async () => {
    const t = shell('local:nosuchsandbox1');
    expect(await t.exited).toBe(1);
    expect(t.output()).toContain('not_found');
  });
});

describe('shell into an e2b sandbox (the fake)', () => {
  let fake: FakeE2b;
  let e2bId: string;
  beforeAll(async () => {
    fake = await startFakeE2b();
    const server = await connectStdio(fake.env, ['--provider', 'e2b']);
    try {
      e2bId = (await ok(server.client, 'create_sandbox', {})).sandbox_id;
      // A task retains the sandbox past the session.
      await ok(server.client, 'start_task', { command: 'true' });
    } finally {
      await server.close();
    }
  });
  afterAll(async () => {
    await fake?.close();
  });

  it('opens the SDK pty: a terminal inside, its size following, exit status passed on', async () => {
    const t = shell(e2bId, [], fake.env);
    expect(await ask(t, 'TTY', '$(tty)')).toMatch(/^\/dev\/pts\/\d+$/);
    expect(await ask(t, 'MATH', '$((6*7))')).toBe('42');
    expect(await ask(t, 'SIZE', '$(stty size)')).toBe('30 100');
    t.term.resize(120, 40);
    await waitFor(async () => (await ask(t, 'SIZE', '$(stty size)')) === '40 120', 'the new size inside');
    t.type('exit 3\r');
    expect(await t.exited).toBe(3);
  });

  it('ends when its input ends, with no terminal', async () => {
    expect(await shellWithoutTerminal(e2bId, undefined, fake.env)).toMatchObject({ code: 0 });
  });

  it('refuses a program after -- with unsupported: E2B runs only its shell', async () => {
    const t = shell(e2bId, ['--', 'ls'], fake.env);
    expect(await t.exited).toBe(1);
    expect(t.output()).toContain('unsupported');
  });
});
