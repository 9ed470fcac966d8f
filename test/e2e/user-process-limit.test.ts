// create_sandbox on a server whose user is at its process limit (RLIMIT_NPROC) says so. Every
// process and thread of the server's uid counts against that limit — its keepers and, for a
// server that is not root, everything in its sandboxes — and near it whichever part of a start
// fails to fork decided how the failure looked: a keeper fault (internal), a 25 s timeout,
// "bubblewrap is not installed", "the kernel refuses user namespaces", "check that bubblewrap
// works" (measured with a limit of 120). The built server runs as a uid of this test's own (no
// other test or server shares its count) under `prlimit --nproc`, and that uid is brought to its
// limit by a bounded number of sleepers (at most the limit, each for at most 120 s).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { chownSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countTasksOf } from '../../host/providers/local/system/user-processes.js';
import { serverEnv } from '../support/built-server.js';
import { isRootOrSkipping, requireSandboxes } from '../support/prerequisites.js';
import { hostJsReadableBy } from '../support/readable-build.js';
import { waitFor } from '../support/wait.js';

/** The server's RLIMIT_NPROC: room for the server (about a dozen threads) and a few sandboxes. */
const LIMIT = 96;
// A uid no account, sandbox (0x70000000 up) or other test uses: this test's count is its own.
const UID = 0x6f00_0000 + randomInt(0x1_0000);
const as = { uid: UID, gid: UID };

beforeAll(() => requireSandboxes());

describe.skipIf(!isRootOrSkipping('the process-limit test (a server as a uid of its own)'))(
  "create_sandbox at the server's user's process limit",
  () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'sandbox-mcp-nproc-'));
    chownSync(stateDir, UID, UID);
    const sleepers: ChildProcess[] = [];
    let client: Client;

    beforeAll(async () => {
      // prlimit lowers its own limit (no privilege needed) and execs setpriv, which execs the server.
      // prettier-ignore
      const transport = new StdioClientTransport({
        command: 'prlimit',
        args: [`--nproc=${LIMIT}:${LIMIT}`, '--', 'setpriv', '--reuid', String(UID), '--regid', String(UID), '--clear-groups', '--',
          process.execPath, hostJsReadableBy(as)],
        cwd: '/',
        env: serverEnv({ SANDBOX_MCP_STATE_DIR: stateDir }),
        stderr: 'ignore',
      });
      client = new Client({ name: 'e2e-nproc', version: '1.0.0' });
      await client.connect(transport);
    });

    afterAll(async () => {
      for (const s of sleepers) s.kill('SIGKILL');
      await client?.close();
      rmSync(stateDir, { recursive: true, force: true });
    });

    const create = async (): Promise<CallToolResult> =>
      (await client.callTool({ name: 'create_sandbox', arguments: { timeout: 120 } })) as CallToolResult;
    const errorOf = (r: CallToolResult) => (JSON.parse((r.content[0] as { text: string }).text) as { error: Record<string, string> }).error;

    /** Starts sleepers as the uid until it holds `LIMIT - headroom` processes and threads (at most LIMIT sleepers). */
    async function fillTo(headroom: number): Promise<void> {
      for (let i = 0; i < LIMIT && countTasksOf(UID) < LIMIT - headroom; i++) {
        const before = countTasksOf(UID);
        const s = spawn('setpriv', ['--reuid', String(UID), '--regid', String(UID), '--clear-groups', 'sleep', '120'], { stdio: 'ignore' });
        sleepers.push(s);
        await waitFor(() => s.exitCode !== null || countTasksOf(UID) > before, 'the sleeper to start');
      }
    }

    /** Ends `n` sleepers and waits until they are gone. */
    async function free(n: number): Promise<void> {
      const before = countTasksOf(UID);
      for (const s of sleepers.splice(0, n)) s.kill('SIGKILL');
      await waitFor(() => countTasksOf(UID) <= before - n, 'the sleepers to be gone');
    }

    it(
      'names the limit (insufficient_resources, user_process_limit) wherever the start broke; freeing processes is the way out',
      { timeout: 240_000 },
      async () => {
        // At the limit, then with a few processes free (where bwrap itself could not fork, measured).
        for (const headroom of [0, 4]) {
          await fillTo(headroom);
          const r = await create();
          expect(r.isError, `create with ${LIMIT - countTasksOf(UID)} processes left`).toBe(true);
          const error = errorOf(r);
          expect(error).toMatchObject({ category: 'insufficient_resources', code: 'user_process_limit' });
          expect(error.suggestion).toContain(`uid ${UID}`);
          expect(error.suggestion).toMatch(new RegExp(`of ${LIMIT} processes and threads \\(RLIMIT_NPROC`));
          expect(error.suggestion).toMatch(/kill_sandbox.*ulimit -u/);
          expect(error.suggestion).not.toMatch(/bubblewrap|bwrap|internal/i);
          if (headroom === 0) await free(4);
        }
        // The way out the error names: with processes freed, a create works.
        await free(sleepers.length);
        const r = await create();
        expect(r.isError).toBeFalsy();
        const id = (r.structuredContent as { sandbox_id: string }).sandbox_id;
        await client.callTool({ name: 'kill_sandbox', arguments: { sandbox_id: id } });
      },
    );
  },
);
