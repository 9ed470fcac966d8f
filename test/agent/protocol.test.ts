// The call contract: one JSON line, exit 0, protocol_mismatch and invalid_request without
// echoing values; the bundle is self-contained and embeds its versions; selftest passes here.
import { builtinModules } from 'node:module';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentRemovesFile, agentSupportsRunAs, HelloResultSchema, SelftestResultSchema } from '../../shared/protocol.js';
import { cancelRequest, getRequest, helloRequest, startRequest } from '../support/agent-requests.js';
import { type AgentWorld, call, callRaw, destroyWorld, newTaskId, newWorld, runAgent } from '../support/agent-world.js';
import { AGENT_BUNDLE, REPO } from '../support/paths.js';
import { requireBuild } from '../support/prerequisites.js';

let world: AgentWorld;
beforeAll(() => {
  requireBuild();
  world = newWorld();
});
afterAll(() => destroyWorld(world));

const errorOf = async (request: Record<string, unknown>) => {
  const res = await call(world, request);
  if (res.ok) throw new Error('expected ok:false');
  return res.error;
};

/** This agent's answer to hello (null, failing the parse, if it answers an error). */
const helloResult = async () => {
  const res = await call(world, helloRequest());
  return HelloResultSchema.parse(res.ok ? res.result : null);
};

describe('bundle', () => {
  it('requires nothing outside the Node standard library', () => {
    const source = readFileSync(AGENT_BUNDLE, 'utf8');
    const required = [...source.matchAll(/\brequire\(\s*["'`]([^"'`]+)["'`]\s*\)/g)].map((m) => m[1]!);
    const imported = [...source.matchAll(/\bimport\(\s*["'`]([^"'`]+)["'`]\s*\)/g)].map((m) => m[1]!);
    expect(required.length).toBeGreaterThan(0);
    for (const name of [...required, ...imported]) expect(builtinModules).toContain(name.replace(/^node:/, ''));
    // No computed requires either: every require call names a literal module.
    expect(source.match(/\brequire\(/g)!.length).toBe(required.length);
  });

  it('embeds its protocol and agent version, answered by hello', async () => {
    const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string };
    const res = await call(world, helloRequest());
    expect(res.ok).toBe(true);
    const hello = HelloResultSchema.parse(res.ok ? res.result : null);
    expect(hello).toEqual({
      agent_version: pkg.version,
      protocol: 1,
      protocol_minor: 11,
      ops: ['hello', 'start', 'get', 'cancel', 'input', 'list', 'remove', 'workspace_changes', 'selftest'],
      state_dir: world.stateDir,
      max_tasks: 128,
      stream_cap_bytes: 1048576,
    });
    expect(readFileSync(AGENT_BUNDLE, 'utf8')).toContain(JSON.stringify(pkg.version));
    const manifest = JSON.parse(readFileSync(join(REPO, 'dist/agent-manifest.json'), 'utf8')) as { file_name: string };
    expect(manifest.file_name).toMatch(new RegExp(`^agent-${pkg.version.replace(/\./g, '\\.')}-[0-9a-f]{16}\\.cjs$`));
  });

  it("says run_as is taken from minor 9 on: an older agent (minor 8, or none reported) is never sent a user's command", async () => {
    const hello = await helloResult();
    expect(agentSupportsRunAs(hello)).toBe(true);
    expect(agentSupportsRunAs({ ...hello, protocol_minor: 8 })).toBe(false);
    const { protocol_minor: _minor, ...minor0 } = hello;
    expect(agentSupportsRunAs(minor0)).toBe(false);
  });

  it('says remove_file is taken from minor 10 on: an older agent (minor 9, or none reported) gets a command that removes the file itself', async () => {
    const hello = await helloResult();
    expect(agentRemovesFile(hello)).toBe(true);
    expect(agentRemovesFile({ ...hello, protocol_minor: 9 })).toBe(false);
    const { protocol_minor: _minor, ...minor0 } = hello;
    expect(agentRemovesFile(minor0)).toBe(false);
  });
});

describe('requests', () => {
  it('answers another major version with protocol_mismatch', async () => {
    expect((await errorOf({ protocol: 2, op: 'hello' })).code).toBe('protocol_mismatch');
    // The version is checked before anything else, even for an op this agent never heard of.
    expect((await errorOf({ protocol: 7, op: 'teleport', extra: true })).code).toBe('protocol_mismatch');
  });

  it('rejects invalid requests naming the field, never echoing its value', async () => {
    const secretish = 'NOT-A-TASK-ID-do-not-echo-me';
    const bad = await errorOf({ protocol: 1, op: 'get', task_id: secretish });
    expect(bad).toEqual({ code: 'invalid_request', message: expect.stringContaining('task_id') });
    expect(bad.message).not.toContain(secretish);

    const unknownField = await errorOf({ protocol: 1, op: 'get', task_id: newTaskId(), sneaky: 'value-xyz' });
    expect(unknownField.code).toBe('invalid_request');
    expect(unknownField.message).toContain('sneaky');
    expect(unknownField.message).not.toContain('value-xyz');

    const tooBig = await errorOf({ protocol: 1, op: 'get', task_id: newTaskId(), limit: 65537 });
    expect(tooBig.message).toMatch(/limit/);
    const notInt = await errorOf({ protocol: 1, op: 'get', task_id: newTaskId(), wait_s: 1.5 });
    expect(notInt.message).toMatch(/wait_s/);
    const missing = await errorOf({ protocol: 1, op: 'start', task_id: newTaskId() });
    expect(missing.message).toMatch(/command/);
    expect((await errorOf({ op: 'hello' })).message).toMatch(/protocol/);
    expect((await errorOf({ protocol: 1, op: 'teleport' })).code).toBe('invalid_request');
  });

  it('rejects a non-base64url or non-JSON argument as invalid_request, still with exit 0', async () => {
    for (const arg of ['%%%', Buffer.from('not json').toString('base64url'), Buffer.from('[1,2]').toString('base64url')]) {
      const res = await callRaw(world, arg);
      expect(res).toMatchObject({ protocol: 1, ok: false, error: { code: 'invalid_request' } });
    }
  });

  it('answers not_found for a task this user never started', async () => {
    expect((await errorOf(getRequest(newTaskId()))).code).toBe('not_found');
    expect((await errorOf(cancelRequest(newTaskId()))).code).toBe('not_found');
  });

  it('refuses a cwd that is not a directory, naming the field', async () => {
    const res = await errorOf(startRequest('true', { cwd: '/definitely/missing/dir' }));
    expect(res.code).toBe('invalid_request');
    expect(res.message).toContain('cwd');
    expect(res.message).not.toContain('/definitely/missing/dir');
  });
});

describe('selftest', () => {
  it('passes on this machine from the CLI, exit 0, with every check named', async () => {
    const res = await runAgent(world, ['selftest']);
    expect(res.exitCode).toBe(0);
    const report = SelftestResultSchema.parse(JSON.parse(res.stdout));
    expect(report.ok).toBe(true);
    expect(report.checks.map((c) => c.name)).toEqual([
      'proc',
      'state_dir',
      'atomic_rename',
      'process_group',
      'log_cap',
      'masking',
      'supervisor',
      'stdin',
    ]);
    expect(report.checks.every((c) => c.ok)).toBe(true);
  });

  it('still reports (exit 1, every check named) when the temp dir is unusable, and cleans up after itself', async () => {
    const notADir = join(world.home, 'plain-file');
    writeFileSync(notADir, '');
    const res = await runAgent(world, ['selftest'], { TMPDIR: notADir });
    expect(res.exitCode).toBe(1);
    const report = SelftestResultSchema.parse(JSON.parse(res.stdout));
    expect(report.ok).toBe(false);
    const byName = new Map(report.checks.map((c) => [c.name, c]));
    expect(byName.get('scratch')).toMatchObject({ ok: false, detail: expect.stringContaining('TMPDIR') });
    // Checks that need no scratch space still ran and passed; the others failed, not passed.
    expect(byName.get('process_group')?.ok).toBe(true);
    expect(byName.get('supervisor')?.ok).toBe(false);
  });

  it('leaves no scratch directory behind', async () => {
    const tmp = join(world.home, 'tmp');
    mkdirSync(tmp);
    const res = await runAgent(world, ['selftest'], { TMPDIR: tmp });
    expect(res.exitCode).toBe(0);
    expect(readdirSync(tmp)).toEqual([]);
  });

  it('is also an op', async () => {
    const res = await call(world, { protocol: 1, op: 'selftest' });
    expect(res.ok && SelftestResultSchema.parse(res.result).ok).toBe(true);
  });
});
