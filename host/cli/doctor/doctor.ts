// `sandbox-mcp doctor`: every check local sandboxes depend on, in the order a person would fix
// them, printed as ok / warn / fail lines with a one-line fix (or as JSON). The exit status is 0
// only when local sandboxes work here.
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { loadAgentBundle } from '../../providers/agent-bundle.js';
import type { ServerConfig } from '../../config/config.js';
import { localProviderOpts } from '../../config/local-options.js';
import { LOCAL_DETAILS } from '../../providers/local/errors.js';
import { createLocalProvider, defaultKeeperScript } from '../../providers/local/local-provider.js';
import { findExecutable } from '../../providers/local/system/preflight.js';
import { helpersDir } from '../../providers/local/launch/perl-helpers.js';
import { hasSysResource } from '../../providers/local/limits/layers.js';
import { resolveLimitSettings } from '../../providers/local/limits/settings.js';
import { defaultStateDir } from '../../providers/local/sandbox/state-dir.js';
import { checkBubblewrap, checkUserNamespaces, checkUtilLinux } from './bubblewrap-checks.js';
import { checkCgroups } from './cgroup-check.js';
import { checkNetwork } from './network-check.js';
import { fail, ok, warn, type Check } from './check.js';
import { checkLimits } from './limits-check.js';
import { checkNodeVersion } from './node-version.js';
import { checkPerl } from './perl-check.js';
import { checkSandbox } from './sandbox-check.js';
import { checkStateDir } from './state-dir-check.js';
import { HOST_VERSION } from '../../config/version.js';

/** The built files the server runs besides itself, found relative to the installed bundle. */
function checkServerFiles(): Check {
  const keeper = existsSync(defaultKeeperScript()) && existsSync(join(helpersDir(defaultKeeperScript()), 'enter.pl'));
  let hasAgent = true;
  try {
    loadAgentBundle();
  } catch {
    hasAgent = false;
  }
  if (keeper && hasAgent) return ok('server files', 'the keeper (dist/keeper.cjs) and the agent (dist/agent.cjs) are beside the server');
  return fail(
    'server files',
    `${keeper ? 'the agent (dist/agent.cjs)' : 'the keeper (dist/keeper.cjs) or its helpers (dist/helpers/)'} is missing`,
    LOCAL_DETAILS.hostBundleMissing,
  );
}

/** Whether E2B credentials are configured; never shows the key. */
function checkE2bKey(config: ServerConfig): Check {
  if (config.e2b.apiKey) return ok('E2B_API_KEY', 'set (not verified here; the e2b provider uses it)');
  if (config.defaultProvider === 'e2b') {
    return warn(
      'E2B_API_KEY',
      'not set, but the default provider is e2b: every e2b call fails with authentication',
      "set E2B_API_KEY in the server's environment",
    );
  }
  return ok('E2B_API_KEY', 'not set (only the e2b provider needs it)');
}

/** Whether skopeo is here: only `template pull` needs it (import and sandboxes do not), so its absence fails nothing. */
function checkSkopeo(): Check {
  const skopeo = findExecutable('skopeo');
  if (skopeo) return ok('skopeo', `skopeo at ${skopeo} (template pull)`);
  return ok('skopeo', 'not installed (only template pull needs it: apt-get install skopeo)');
}

/** Runs every check in order; a sandbox is tried only when nothing before it failed. */
export async function collectChecks(config: ServerConfig): Promise<Check[]> {
  const checks: Check[] = [checkNodeVersion()];
  if (process.platform !== 'linux') {
    checks.push(fail('platform', `${process.platform} is not Linux`, LOCAL_DETAILS.notLinux));
  } else {
    const isRoot = process.getuid?.() === 0;
    const bwrap = checkBubblewrap(config.bwrapPath);
    const utilLinux = checkUtilLinux(isRoot);
    checks.push(bwrap.check, ...utilLinux.checks, checkPerl());
    // Only a bwrap that passed its own check is worth trying namespaces with.
    if (bwrap.path && bwrap.check.status !== 'fail') checks.push(await checkUserNamespaces(bwrap.path, utilLinux.setpriv, isRoot));
    const cgroups = await checkCgroups();
    checks.push(cgroups.check);
    // Without a bwrap there is no version to judge the disk limit by: its own line says what to install.
    if (bwrap.path) {
      const limits = resolveLimitSettings(config.localLimits);
      checks.push(
        checkLimits(
          {
            cgroup: cgroups.enforced,
            hasCeilingCgroup: cgroups.hasCeiling,
            bwrapHasSize: bwrap.hasSize,
            canExemptFromOom: hasSysResource(),
          },
          limits,
        ),
      );
    }
    checks.push(checkStateDir(resolve(config.stateDir ?? defaultStateDir())), checkServerFiles());
    if (checks.some((c) => c.status === 'fail')) {
      checks.push(fail('sandbox', 'not tried: a check above failed', 'fix the failures above, then run sandbox-mcp doctor again'));
    } else {
      const provider = createLocalProvider(localProviderOpts(config));
      try {
        checks.push(...(await checkSandbox(provider)));
      } finally {
        await provider.close();
      }
    }
  }
  checks.push(checkNetwork(config), checkSkopeo(), checkE2bKey(config));
  return checks;
}

/** The report a person reads: one line per check, the fix indented under it. */
export function formatChecks(checks: readonly Check[]): string {
  const width = Math.max(...checks.map((c) => c.name.length));
  const lines = [`sandbox-mcp doctor ${HOST_VERSION}`];
  for (const c of checks) {
    lines.push(`${c.status.padEnd(4)}  ${c.name.padEnd(width)}  ${c.message}`);
    if (c.fix) lines.push(`${' '.repeat(6 + width)}  fix: ${c.fix}`);
  }
  const failed = checks.some((c) => c.status === 'fail');
  lines.push(failed ? 'Local sandboxes cannot work here until the failures above are fixed.' : 'Local sandboxes work here.');
  return lines.join('\n') + '\n';
}

/** Runs the doctor, writes its report to stdout, and returns the exit status (0: local sandboxes work). */
export async function runDoctor(config: ServerConfig, opts: { json: boolean }): Promise<number> {
  const checks = await collectChecks(config);
  const passed = !checks.some((c) => c.status === 'fail');
  process.stdout.write(opts.json ? JSON.stringify({ ok: passed, version: HOST_VERSION, checks }, null, 2) + '\n' : formatChecks(checks));
  return passed ? 0 : 1;
}
