// create_sandbox on a server whose user is at its process limit (RLIMIT_NPROC) says so. Every
// process and thread of the server's uid counts against that limit — its keepers and, for a
// server that is not root, everything in its sandboxes — and near it whichever part of a start
// fails to fork decided how the failure looked: a keeper fault (internal), a 25 s timeout,
// "bubblewrap is not installed", "the kernel refuses user namespaces", "check that bubblewrap
// works" (measured with a limit of 120). The built server runs as a uid of this test's own (no
// other test or server shares its count) under `prlimit --nproc`, and that uid is brought to its
// limit by a bounded number of sleepers (at most the limit, each for at most 120 s). With 2 left
// a keeper hung unseen until the server's 25 s start timeout (node waits forever for a platform
// worker it could not start): each create here is bounded well below that, so a hang fails it.
// The same for a create with an egress allow-list, whose keeper starts a node helper in the
// sandbox's network namespace for the proxy's socket: with 2 left for it (9 at the create,
// measured) it hung until its request gave up, 10 s, so those creates are bounded below that.
// And a create that works gives a sandbox whose first call works: near the limit a sandbox could
// start with too little left for its resident and a first call, whose answers were then wrong.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { chownSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countTasksOf } from '../../host/providers/local/system/user-processes.js';
import { serverEnv } from '../support/built-server.js';
import { isRootOrSkipping, requireSandboxes } from '../support/prerequisites.js';
import { cmdline } from '../support/processes.js';
import { hostJsReadableBy } from '../support/readable-build.js';
import { waitFor } from '../support/wait.js';

/** The server's RLIMIT_NPROC: room for the server (about a dozen threads) and a few sandboxes. */
const LIMIT = 96;
// A uid no account, sandbox (0x70000000 up) or other test uses: this test's count is its own.
const UID = 0x6f00_0000 + randomInt(0x1_0000);
const as = { uid: UID, gid: UID };
/**
 * A ceiling for one create's answer, far below the server's start timeout (25 s) and far above a
 * prompt answer near the limit: a bound for a hang, not a timing assertion.
 */
const CREATE_BOUND_MS = 15_000;
/** The same for a create with an allow-list: below the 10 s after which the keeper gives up on its netns helper. */
const NETWORK_CREATE_BOUND_MS = 8_000;
/** The one destination the server permits (nothing listens there: the proxy only has to start). */
const ALLOWED = '127.0.0.1:9';

/** The real uid of `pid`, or null when it is gone. */
function realUidOf(pid: number): number | null {
  try {
    return Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
  } catch {
    return null;
  }
}

/** The pids whose real uid is `uid`. */
function pidsOf(uid: number): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .filter((pid) => {
      try {
        return Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]) === uid;
      } catch {
        return false;
      }
    })
    .map(Number);
}

beforeAll(() => requireSandboxes());

describe.skipIf(!isRootOrSkipping('the process-limit test (a server as a uid of its own)'))(
  "create_sandbox at the server's user's process limit",
  () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'sandbox-mcp-nproc-'));
    chownSync(stateDir, UID, UID);
    const sleepers: ChildProcess[] = [];
    let client: Client;
    let serverPid: number;

    beforeAll(async () => {
      // prlimit lowers its own limit (no privilege needed) and execs setpriv, which execs the server.
      // prettier-ignore
      const transport = new StdioClientTransport({
        command: 'prlimit',
        args: [`--nproc=${LIMIT}:${LIMIT}`, '--', 'setpriv', '--reuid', String(UID), '--regid', String(UID), '--clear-groups', '--',
          process.execPath, hostJsReadableBy(as)],
        cwd: '/',
        env: serverEnv({ SANDBOX_MCP_STATE_DIR: stateDir, SANDBOX_MCP_NETWORK_ALLOW: ALLOWED }),
        stderr: 'ignore',
      });
      client = new Client({ name: 'e2e-nproc', version: '1.0.0' });
      await client.connect(transport);
      serverPid = transport.pid!;
    });

    afterAll(async () => {
      for (const s of sleepers) s.kill('SIGKILL');
      await client?.close();
      rmSync(stateDir, { recursive: true, force: true });
    });

    /**
     * One create (with an egress allow-list when `withNetwork`), failing the test (naming `what`)
     * when it does not answer within CREATE_BOUND_MS (NETWORK_CREATE_BOUND_MS).
     */
    async function create(what: string, withNetwork = false): Promise<CallToolResult> {
      try {
        const network = withNetwork ? { network: { allow_out: [ALLOWED] } } : {};
        return (await client.callTool({ name: 'create_sandbox', arguments: { timeout: 120, ...network } }, undefined, {
          timeout: withNetwork ? NETWORK_CREATE_BOUND_MS : CREATE_BOUND_MS,
        })) as CallToolResult;
      } catch (e) {
        throw new Error(`create ${what}: ${(e as Error).message}`, { cause: e });
      }
    }
    const errorOf = (r: CallToolResult) => (JSON.parse((r.content[0] as { text: string }).text) as { error: Record<string, string> }).error;

    /** Starts sleepers as the uid until it holds `LIMIT - headroom` processes and threads (at most LIMIT sleepers). */
    async function fillTo(headroom: number): Promise<void> {
      for (let i = 0; i < LIMIT && countTasksOf(UID) < LIMIT - headroom; i++) {
        const s = spawn('setpriv', ['--reuid', String(UID), '--regid', String(UID), '--clear-groups', 'sleep', '120'], { stdio: 'ignore' });
        sleepers.push(s);
        // Started once its pid runs as the uid (setpriv execs sleep): the count may move otherwise too.
        await waitFor(() => s.exitCode !== null || (s.pid !== undefined && realUidOf(s.pid) === UID), 'the sleeper to start');
      }
    }

    /** Waits until the uid runs nothing but the server and the sleepers (what a create started is gone). */
    async function settled(): Promise<void> {
      await waitFor(() => {
        const ours = new Set([serverPid, ...sleepers.map((s) => s.pid)]);
        return pidsOf(UID).every((pid) => ours.has(pid));
      }, "the failed create's processes to be gone");
    }

    /** Ends `n` sleepers and waits until they are gone. */
    async function free(n: number): Promise<void> {
      const before = countTasksOf(UID);
      for (const s of sleepers.splice(0, n)) s.kill('SIGKILL');
      await waitFor(() => countTasksOf(UID) <= before - n, 'the sleepers to be gone');
    }

    /** Expects `r` to name the user's process limit. */
    function expectLimitError(r: CallToolResult, left: number): void {
      expect(r.isError, `create with ${left} processes left`).toBe(true);
      const error = errorOf(r);
      expect(error, `create with ${left} processes left`).toMatchObject({ category: 'insufficient_resources', code: 'user_process_limit' });
      expect(error.suggestion).toContain(`uid ${UID}`);
      expect(error.suggestion).toMatch(new RegExp(`of ${LIMIT} processes and threads \\(RLIMIT_NPROC`));
      expect(error.suggestion).toMatch(/kill_sandbox.*ulimit -u/);
      expect(error.suggestion).not.toMatch(/bubblewrap|bwrap|internal/i);
    }

    it(
      'names the limit (insufficient_resources, user_process_limit) at once with 4, 3, 2, 1 or 0 processes left, wherever the start broke; freeing processes is the way out',
      { timeout: 240_000 },
      async () => {
        // 4 and 3: the keeper starts and bwrap cannot (measured); 2: the keeper would hang, unseen;
        // 1: node aborts; 0: the keeper is not forked. Each answer comes within CREATE_BOUND_MS.
        for (const headroom of [4, 3, 2, 1, 0]) {
          await fillTo(headroom);
          const left = LIMIT - countTasksOf(UID);
          const r = await create(`with ${left} processes left`);
          if (r.isError) expectLimitError(r, left);
          else
            await client.callTool({
              name: 'kill_sandbox',
              arguments: { sandbox_id: (r.structuredContent as { sandbox_id: string }).sandbox_id },
            });
          await settled();
        }
        // The way out the error names: with processes freed, a create works.
        await free(sleepers.length);
        const r = await create('with the sleepers gone');
        expect(r.isError).toBeFalsy();
        const id = (r.structuredContent as { sandbox_id: string }).sandbox_id;
        await client.callTool({ name: 'kill_sandbox', arguments: { sandbox_id: id } });
      },
    );

    /** `echo hi` in the sandbox, failing the test (naming `what`) when it does not answer within CREATE_BOUND_MS. */
    async function echoIn(sandboxId: string, what: string): Promise<CallToolResult> {
      try {
        const args = { sandbox_id: sandboxId, command: 'echo hi' };
        return (await client.callTool({ name: 'run_command', arguments: args }, undefined, { timeout: CREATE_BOUND_MS })) as CallToolResult;
      } catch (e) {
        throw new Error(`${what}: ${(e as Error).message}`, { cause: e });
      }
    }

    /**
     * Creates at each of `headrooms` (descending), with an allow-list when `withNetwork`: each
     * names the limit, or gives a sandbox whose first run_command works; each answer bounded.
     * Returns `left: created|limit` for each.
     */
    async function sweep(headrooms: number[], withNetwork: boolean): Promise<string[]> {
      // From where the last test left the uid: as many sleepers fewer as the first headroom needs.
      await free(Math.max(0, headrooms[0]! - (LIMIT - countTasksOf(UID))));
      const outcomes: string[] = [];
      for (const headroom of headrooms) {
        await fillTo(headroom);
        const left = LIMIT - countTasksOf(UID);
        const what = `${withNetwork ? 'with an allow-list and ' : 'with '}${left} processes left`;
        const r = await create(what, withNetwork);
        if (r.isError) expectLimitError(r, left);
        else {
          const sandboxId = (r.structuredContent as { sandbox_id: string }).sandbox_id;
          const call = await echoIn(sandboxId, `the first run_command of a sandbox created ${what}`);
          expect(call.structuredContent ?? call.content, `the first run_command of a sandbox created ${what}`).toMatchObject({
            exit_code: 0,
            stdout: 'hi\n',
          });
          await client.callTool({ name: 'kill_sandbox', arguments: { sandbox_id: sandboxId } });
        }
        outcomes.push(`${left}: ${r.isError ? 'limit' : 'created'}`);
        await settled();
      }
      return outcomes;
    }

    it(
      'a create with an egress allow-list works with 30 processes left; with 11 down to 7 left (its netns helper starting with 4 to 0) it works or names the limit, never waits for a hung helper',
      { timeout: 240_000 },
      async () => {
        // Measured before the fix: 9 left at the create left 2 for the helper, which hung until its
        // request gave up (10.2 s, then user_process_limit); 8 and 7: it aborted or was not forked.
        const outcomes = await sweep([30, 11, 10, 9, 8, 7], true);
        expect(outcomes[0], outcomes.join(', ')).toMatch(/created$/);
      },
    );

    it(
      "a created sandbox's first run_command works (never exit_code null, a 5 s wait, nsenter's fork failure): with 23 down to 18 left a create works or names the limit",
      { timeout: 240_000 },
      async () => {
        // Measured before the fix: 20 left at the create and the call worked; 18: exit_code null and
        // no output (with 16 and 14 after 20 s, a task in state unknown). The keeper now fails a
        // start that leaves too little for its resident and a first call (FIRST_CALL_TASKS).
        const outcomes = await sweep([23, 22, 21, 20, 19, 18], false);
        // The sweep went from creates that work to creates refused: it crossed the keeper's check.
        expect(outcomes[0], outcomes.join(', ')).toMatch(/created$/);
        expect(outcomes.at(-1), outcomes.join(', ')).toMatch(/limit$/);
      },
    );

    /** A sandbox created with 40 processes left and called once (`echo hi` ran): a later test's subject. */
    async function sandboxCalledOnce(): Promise<string> {
      await free(Math.max(0, 40 - (LIMIT - countTasksOf(UID))));
      const r = await create('with 40 processes left');
      expect(r.isError, JSON.stringify(r.content)).toBeFalsy();
      const sandboxId = (r.structuredContent as { sandbox_id: string }).sandbox_id;
      const first = await echoIn(sandboxId, 'the first run_command');
      expect(first.structuredContent).toMatchObject({ exit_code: 0, stdout: 'hi\n' });
      return sandboxId;
    }

    /**
     * One run_command of `echo hi` with what is left now (`how`: the sandbox's state, for the
     * message), noted in `outcomes`: it ran, or it named the limit. True when it named the limit.
     */
    async function echoNoted(sandboxId: string, outcomes: string[], how = ''): Promise<boolean> {
      const left = LIMIT - countTasksOf(UID);
      const what = `run_command with ${left} processes left${how} (after ${outcomes.join(', ')})`;
      const call = await echoIn(sandboxId, what);
      outcomes.push(`${left}: ${call.isError ? 'limit' : 'ran'}`);
      if (!call.isError) {
        expect(call.structuredContent, what).toMatchObject({ exit_code: 0, stdout: 'hi\n', stderr: '' });
        return false;
      }
      const error = errorOf(call);
      expect(error, what).toMatchObject({ category: 'insufficient_resources', code: 'user_process_limit' });
      expect(error.suggestion, what).toContain(`uid ${UID}`);
      expect(error.suggestion, what).toMatch(/the command could not be started \(nothing ran\)/);
      return true;
    }

    /**
     * The way out the limit's error names: with the sleepers gone, the same sandbox runs `echo hi`
     * again. Then logs the sweep's `outcomes` and kills the sandbox.
     */
    async function expectRunsOnceFreed(sandboxId: string, outcomes: string[]): Promise<void> {
      await free(sleepers.length);
      const again = await echoIn(sandboxId, 'run_command with the sleepers gone');
      expect(again.structuredContent, outcomes.join(', ')).toMatchObject({ exit_code: 0, stdout: 'hi\n' });
      console.log(outcomes.join(', '));
      await client.callTool({ name: 'kill_sandbox', arguments: { sandbox_id: sandboxId } });
    }

    it(
      'a sandbox whose user reaches the limit later: with 6 down to 0 left each run_command runs or names the limit (never exit_code null, never unanswered); freed, the next runs',
      { timeout: 240_000 },
      async () => {
        // Measured before the fix (a sandbox made with 40 left, called once, its uid then filled):
        // 6 left, exit_code null and no output; 5, its supervisor stuck in node's start (waiting
        // for a platform worker it could not create), no answer in 15 s; 0, exit_code null.
        const sandboxId = await sandboxCalledOnce();
        const outcomes: string[] = [];
        for (const headroom of [6, 5, 4, 3, 2, 1, 0]) {
          await fillTo(headroom);
          await echoNoted(sandboxId, outcomes);
        }
        // At 0 left a supervisor waiting with its shell started runs `echo hi` without a new
        // process; the next has none waiting (none could be booted ahead) and must name the limit.
        let isNamed = false;
        for (let i = 0; i < 4 && !isNamed; i++) {
          await fillTo(0);
          isNamed = await echoNoted(sandboxId, outcomes);
        }
        expect(isNamed, outcomes.join(', ')).toBe(true);
        await expectRunsOnceFreed(sandboxId, outcomes);
      },
    );

    it(
      'a call that boots its supervisor near the limit (none waiting): with 5 down to 0 left it runs or names the limit within 15 s, never a task in state unknown',
      { timeout: 240_000 },
      async () => {
        // Measured on this build before the supervisor start-up watch: with 1 left node aborted
        // in its start (no thread for its platform) and the call answered at once with a task in
        // state unknown; with 2 left it sat stuck in its start forever (2 threads, main in a futex
        // wait) and the start waited its 20 s for a first status. Now a supervisor aborted within
        // 2 s of its spawn, or killed below a started node's threads at 2-3 s, never started its
        // task: the command runs plain, or the call names the limit.
        const sandboxId = await sandboxCalledOnce();
        const outcomes: string[] = [];
        for (const headroom of [5, 4, 3, 2, 1, 0]) {
          // The supervisors waiting from the last call retire after 3 s idle (SANDBOX_AGENT_WARM_IDLE_MS).
          await new Promise((resolve) => setTimeout(resolve, 3600));
          await fillTo(headroom);
          await echoNoted(sandboxId, outcomes);
          // Room again for the next boot (each call's leftovers go on their own).
          await free(Math.max(0, 10 - (LIMIT - countTasksOf(UID))));
        }
        console.log(outcomes.join(', '));
        await client.callTool({ name: 'kill_sandbox', arguments: { sandbox_id: sandboxId } });
      },
    );

    /** The pids of the uid's resident agents (`agent… serve`). */
    function residentsOf(uid: number): number[] {
      return pidsOf(uid).filter((pid) => {
        const argv = cmdline(pid);
        return argv.includes('serve') && argv.some((a) => a.includes('agent'));
      });
    }

    it(
      "a sandbox whose resident is gone (killed, its restart short of processes): run_command with 3 down to 0 left runs or names the limit, never nsenter's fork failure as the command's output",
      { timeout: 240_000 },
      async () => {
        // Measured before: with 1 left the call went the nsenter way and answered exit_code 1 with
        // "nsenter: fork failed: Resource temporarily unavailable" as the command's stderr; with 0
        // the server's own spawn failed and the call said the machine was out of processes.
        const sandboxId = await sandboxCalledOnce();
        const outcomes: string[] = [];
        for (const headroom of [3, 2, 1, 0]) {
          const residents = residentsOf(UID);
          for (const pid of residents) process.kill(pid, 'SIGKILL');
          await waitFor(() => residents.every((pid) => realUidOf(pid) === null), 'the resident to be gone');
          await fillTo(headroom);
          await echoNoted(sandboxId, outcomes, ' and no resident');
        }
        // With none left not even the server's own spawn of the entry fits.
        expect(outcomes.at(-1), outcomes.join(', ')).toMatch(/^0: limit$/);
        await expectRunsOnceFreed(sandboxId, outcomes);
      },
    );

    it(
      'a start_task whose supervisor cannot be started (none waiting, 0 left) names the limit as run_command does; freed, the next starts',
      { timeout: 240_000 },
      async () => {
        // Measured before: out_of_processes ("a process limit of the user the sandbox runs as, or
        // of the machine"), where run_command at the same point names the server's user's limit.
        const sandboxId = await sandboxCalledOnce();
        // The supervisors waiting from that call retire after 3 s idle (SANDBOX_AGENT_WARM_IDLE_MS).
        await new Promise((resolve) => setTimeout(resolve, 3600));
        await fillTo(0);
        const start = async () =>
          (await client.callTool({ name: 'start_task', arguments: { sandbox_id: sandboxId, command: 'echo hi' } }, undefined, {
            timeout: CREATE_BOUND_MS,
          })) as CallToolResult;
        const refused = await start();
        expect(refused.isError, JSON.stringify(refused.structuredContent ?? refused.content)).toBe(true);
        const error = errorOf(refused);
        expect(error).toMatchObject({ category: 'insufficient_resources', code: 'user_process_limit' });
        expect(error.suggestion).toContain(`uid ${UID}`);
        expect(error.suggestion).toMatch(/the task could not be started \(nothing ran\)/);
        // The way out it names: with processes freed, the same sandbox starts tasks again.
        await free(sleepers.length);
        const started = await start();
        expect(started.isError, JSON.stringify(started.content)).toBeFalsy();
        await client.callTool({ name: 'kill_sandbox', arguments: { sandbox_id: sandboxId } });
      },
    );
  },
);
