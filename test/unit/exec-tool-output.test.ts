// run_command's rendering of captured output, through the real tool handler (callTool), with a
// provider that returns fixed captures: the omitted-output marker goes where the provider's
// result says its head ends, whatever the cap's halves would be.
import { describe, expect, it } from 'vitest';
import { AgentClient } from '../../host/tasks/agent-client.js';
import { BACKGROUND_AFTER_DEFAULT_S } from '../../host/config/config.js';
import { ProviderError } from '../../host/providers/provider-error.js';
import { createLogger } from '../../host/util/log.js';
import { SecretMasker } from '../../host/mcp/mask.js';
import type { ExecResult, Provider } from '../../host/providers/provider.js';
import { TaskRetention } from '../../host/tasks/retention.js';
import { OwnerCache } from '../../host/access/owner-scope.js';
import { WorkspacePaths } from '../../host/tasks/workspace-changes.js';
import { WaitGate } from '../../host/tasks/wait-gate.js';
import type { ServerDeps } from '../../host/mcp/server-deps.js';
import { callTool } from '../../host/mcp/tool-call.js';
import { Session } from '../../host/mcp/session.js';

/** A provider whose exec returns `result`; anything else is not expected here. */
function execOnlyProvider(result: ExecResult): Provider {
  const unexpected = async (): Promise<never> => {
    throw new ProviderError('unsupported');
  };
  return {
    id: 'local',
    create: unexpected,
    list: unexpected,
    getInfo: unexpected,
    setTimeout: unexpected,
    kill: unexpected,
    getOwner: async () => null,
    getEnvironment: async () => ({}),
    exec: async () => result,
    readFile: unexpected,
    writeFile: unexpected,
    listFiles: unexpected,
    exposePort: unexpected,
    describeNetwork: unexpected,
    close: async () => undefined,
  };
}

function depsWith(provider: Provider, secrets: string[] = []): ServerDeps {
  return {
    config: {
      defaultProvider: 'local',
      localNetwork: 'isolated',
      e2b: {},
      backgroundAfterS: BACKGROUND_AFTER_DEFAULT_S,
      secretValues: secrets,
    },
    providers: { get: () => provider },
    agent: new AgentClient({ bytes: Buffer.from(''), fileName: 'agent-test.cjs', version: 'test' }),
    masker: new SecretMasker(secrets),
    retention: new TaskRetention(),
    waits: new WaitGate(4),
    owners: new OwnerCache(),
    workspaces: new WorkspacePaths(),
    log: createLogger({ write: () => undefined }),
  };
}

async function runCommandWith(capture: Partial<ExecResult>, secrets: string[] = []) {
  const result: ExecResult = {
    exitCode: 0,
    stdout: Buffer.alloc(0),
    stderr: Buffer.alloc(0),
    stdoutTruncated: false,
    stderrTruncated: false,
    stdoutHeadBytes: 0,
    stderrHeadBytes: 0,
    timedOut: false,
    ...capture,
  };
  const r = await callTool({ deps: depsWith(execOnlyProvider(result), secrets), session: new Session() }, 'run_command', {
    command: 'true',
    sandbox_id: 'local:sb1',
  });
  expect(r.isError).toBeUndefined();
  return r.structuredContent as { stdout: string; stderr: string; stdout_truncated: boolean; stderr_truncated: boolean };
}

describe('run_command output rendering', () => {
  it("puts the omitted-output marker at the provider's head boundary, per stream", async () => {
    const out = await runCommandWith({
      stdout: Buffer.from('ABCtail-of-stdout'),
      stdoutTruncated: true,
      stdoutHeadBytes: 3,
      stderr: Buffer.from('first-twelve|last'),
      stderrTruncated: true,
      stderrHeadBytes: 12,
    });
    const [outHead, outTail] = out.stdout.split(/\n\[\.\.\. output truncated[^\n]*\]\n/);
    expect([outHead, outTail]).toEqual(['ABC', 'tail-of-stdout']);
    const [errHead, errTail] = out.stderr.split(/\n\[\.\.\. output truncated[^\n]*\]\n/);
    expect([errHead, errTail]).toEqual(['first-twelve', '|last']);
    expect([out.stdout_truncated, out.stderr_truncated]).toEqual([true, true]);
  });

  it('adds no marker to an untruncated stream', async () => {
    const out = await runCommandWith({ stdout: Buffer.from('all of it\n'), stdoutHeadBytes: 10 });
    expect(out.stdout).toBe('all of it\n');
    expect(out.stdout_truncated).toBe(false);
  });

  it('masks a secret in the head and in the tail, each on its own side of the marker', async () => {
    const secret = 'tok-123456';
    const out = await runCommandWith({ stdout: Buffer.from(`a ${secret}|${secret} z`), stdoutTruncated: true, stdoutHeadBytes: 13 }, [
      secret,
    ]);
    expect(out.stdout).not.toContain(secret);
    expect(out.stdout.startsWith('a [MASKED]|\n')).toBe(true);
    expect(out.stdout.endsWith('\n[MASKED] z')).toBe(true);
  });
});
