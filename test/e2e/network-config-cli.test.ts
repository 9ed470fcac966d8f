// `sandbox-mcp network` without a sandbox id prints, as JSON on stdout, the network configuration:
// what create_sandbox may allow (the permitted set, presets expanded), the default, and the local
// mode. It starts no sandbox. A bad entry exits 2 naming it by position, never by value.
import { execFile } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serverEnv } from '../support/built-server.js';
import { HOST_JS } from '../support/paths.js';
import { requireBuild } from '../support/prerequisites.js';
import { destroyStateDir, tempStateDir } from '../support/state-dir.js';

const stateDir = tempStateDir();

beforeAll(() => requireBuild());
afterAll(() => destroyStateDir(stateDir));

/** Runs the built CLI with a clean environment plus `env`. */
function cli(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [HOST_JS, ...args],
      { env: serverEnv({ SANDBOX_MCP_STATE_DIR: stateDir, ...env }) },
      (error, stdout, stderr) => resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr }),
    );
  });
}

/** `network` must succeed with stdout holding exactly one JSON object. */
async function networkConfig(args: string[] = [], env: Record<string, string> = {}): Promise<unknown> {
  const r = await cli(['network', ...args], env);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout);
}

describe('`sandbox-mcp network` without a sandbox id', () => {
  it('prints the default configuration: nothing permitted, the provider default, isolated local sandboxes', async () => {
    expect(await networkConfig()).toEqual({ permitted: [], default: 'provider', local_network: 'isolated' });
    // It only reads the configuration: no sandbox was made.
    const local = join(stateDir, 'local');
    expect(existsSync(local) ? readdirSync(local) : []).toEqual([]);
  });

  it('prints what the flags and variables configure, exactly as given', async () => {
    expect(
      await networkConfig([], {
        SANDBOX_MCP_NETWORK_ALLOW: 'api.example.com,*.example.org:8443,127.0.0.1:5432',
        SANDBOX_MCP_NETWORK_DEFAULT: 'allowed',
        SANDBOX_MCP_LOCAL_NETWORK: 'host',
      }),
    ).toEqual({ permitted: ['api.example.com', '*.example.org:8443', '127.0.0.1:5432'], default: 'allowed', local_network: 'host' });
    // A flag beats its variable; a repeated flag adds to the set.
    expect(
      await networkConfig(['--network-allow', 'a.example.com', '--network-allow', '[::1]:80', '--network-default', 'none'], {
        SANDBOX_MCP_NETWORK_ALLOW: 'ignored.example.com',
        SANDBOX_MCP_NETWORK_DEFAULT: 'allowed',
      }),
    ).toEqual({ permitted: ['a.example.com', '[::1]:80'], default: 'none', local_network: 'isolated' });
  });

  it('expands the @packages preset into the names it permits', async () => {
    const config = (await networkConfig(['--network-allow', '@packages'])) as { permitted: string[] };
    expect(config.permitted).toEqual(expect.arrayContaining(['pypi.org', 'files.pythonhosted.org', 'registry.npmjs.org', 'github.com']));
    expect(config.permitted).not.toContain('@packages');
  });

  it('refuses a bad entry with exit 2, naming its position and never its value', async () => {
    const r = await cli(['network', '--network-allow', 'ok.example.com,BAD VALUE!']);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('--network-allow');
    expect(r.stderr).toContain('item 2');
    expect(r.stderr).not.toContain('BAD VALUE!');
  });
});
