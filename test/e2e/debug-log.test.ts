// SANDBOX_MCP_DEBUG=1 adds debug lines to the log (stderr), and only then (0 is off, as unset); like every log line they
// carry a static message and whitelisted fields, never a secret. The debug lines there are today
// are a keeper's own faults: here a sandbox whose egress proxy cannot start, because the nsenter
// the server finds first on PATH fails to start the network helper (every other nsenter use goes
// to the real one, so the session works otherwise).
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localServers, ok, toolError, type StdioServer } from '../support/built-server.js';
import { requireCommands } from '../support/prerequisites.js';
import { waitFor } from '../support/wait.js';

const fakeDir = mkdtempSync(join(tmpdir(), 'fake-nsenter-'));
// Registered first, so it runs last: after localServers' afterAll closed the servers and their sandboxes.
afterAll(() => rmSync(fakeDir, { recursive: true, force: true }));
const servers = localServers();
const SERVER_SECRET = 'server-secret-value-0d1e2b';
const CREATE_SECRET = 'create-secret-value-7f3a9c';
const CALL_SECRET = 'call-secret-value-5b8e41';

beforeAll(() => {
  requireCommands(['nsenter']);
  const realNsenter = (process.env.PATH ?? '/usr/bin:/bin')
    .split(':')
    .map((d) => join(d, 'nsenter'))
    .find((p) => existsSync(p))!;
  // The netns helper is the one nsenter call whose command line names --netns-helper.
  writeFileSync(join(fakeDir, 'nsenter'), `#!/bin/sh\ncase "$*" in *--netns-helper*) exit 1 ;; esac\nexec '${realNsenter}' "$@"\n`, {
    mode: 0o755,
  });
  chmodSync(fakeDir, 0o755);
});

/** A stdio server whose nsenter fails the network helper, with SANDBOX_MCP_DEBUG as given (undefined: unset). */
function server(debug: string | undefined): Promise<StdioServer> {
  return servers.connect({
    PATH: `${fakeDir}:${process.env.PATH ?? '/usr/bin:/bin'}`,
    SANDBOX_MCP_NETWORK_ALLOW: 'example.com',
    SERVICE_API_KEY: SERVER_SECRET,
    ...(debug !== undefined ? { SANDBOX_MCP_DEBUG: debug } : {}),
  });
}

/** A session that works (secrets in create and call envs, masked output), then a create whose proxy fails. */
async function sessionWithAKeeperFault(s: StdioServer): Promise<void> {
  const id = (await ok(s.client, 'create_sandbox', { envs: { DB_PASSWORD: CREATE_SECRET } })).sandbox_id as string;
  const r = await ok(s.client, 'run_command', {
    sandbox_id: id,
    command: 'echo "$DB_PASSWORD $CALL_TOKEN"',
    envs: { CALL_TOKEN: CALL_SECRET },
  });
  expect(r.stdout).not.toContain(CREATE_SECRET);
  expect(r.stdout).not.toContain(CALL_SECRET);
  const failed = await toolError(s.client, 'create_sandbox', {
    envs: { DB_PASSWORD: CREATE_SECRET },
    network: { allow_out: ['example.com'] },
  });
  expect(failed.text).not.toContain(CREATE_SECRET);
}

/** Every stderr line, parsed: each must be one JSON object. */
function logLines(s: StdioServer): Record<string, unknown>[] {
  return s
    .stderr()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

function expectNoSecret(s: StdioServer): void {
  for (const secret of [SERVER_SECRET, CREATE_SECRET, CALL_SECRET]) expect(s.stderr()).not.toContain(secret);
}

describe('SANDBOX_MCP_DEBUG', () => {
  it('1: a keeper fault is a debug line in the log, with its code and no secret', async () => {
    const s = await server('1');
    await sessionWithAKeeperFault(s);
    await waitFor(() => logLines(s).some((l) => l.level === 'debug'), 'a debug line');
    const debug = logLines(s).filter((l) => l.level === 'debug');
    expect(debug).toContainEqual({ t: expect.any(String), level: 'debug', msg: 'keeper fault', code: 'helper_failed' });
    for (const line of debug) expect(Object.keys(line).sort()).toEqual(['code', 'level', 'msg', 't']);
    await s.close();
    expectNoSecret(s);
  });

  // 0 once turned debug on, as any value did: the keeper took the variable's presence for the switch.
  it.each([
    ['unset', undefined],
    ['0', '0'],
  ])('%s: the same fault writes no debug line, and the log holds no secret', async (_, debug) => {
    const s = await server(debug);
    await sessionWithAKeeperFault(s);
    await s.close();
    // The session's last line comes after anything the keeper could have written.
    await waitFor(() => logLines(s).some((l) => l.msg === 'stdio session ending'), 'the last log line');
    expect(logLines(s).filter((l) => l.level === 'debug')).toEqual([]);
    expect(s.stderr()).not.toContain('keeper fault');
    expectNoSecret(s);
  });
});
