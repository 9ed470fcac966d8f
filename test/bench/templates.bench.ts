// Benchmarks of local templates (`npm run bench`), each printing its headline figure:
// - create+kill of a sandbox on a template against one on `base`, interleaved in one run (target:
//   at most 1.2x); the template is a root imported from a tarball of host programs (as the tests'),
// - snapshot_sandbox of a sandbox holding 104 MiB of new files (100 x 1 MiB of random bytes and
//   1000 small files: 19-design.md's measure; target at most 2 s),
// - the mmdebstrap build of the tests' template (apt's variant, one mirror, the tests' package
//   cache: warm after a first run), reported.
// As root (templates run with an id block of their own); NODE_EXTRA_CA_CERTS unset.
import { homedir } from 'node:os';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { bench, describe } from 'vitest';
import { createLocalProvider, createLocalTemplates, type LocalProvider } from '../../host/providers/local/local-provider.js';
import { liveWritableLayer } from '../../host/providers/local/rootfs/writable-layer.js';
import { readKeeperRecord } from '../../host/providers/local/sandbox/state-dir.js';
import { signalIfAlive } from '../../host/providers/local/system/proc.js';
import { KEEPER_SCRIPT } from '../support/paths.js';
import { makeMiniRootTar } from '../support/mini-root.js';
import { requireSandboxes } from '../support/prerequisites.js';
import { tempStateDir } from '../support/state-dir.js';
import { median, timed } from '../support/measure.js';

requireSandboxes();
const stateDir = tempStateDir();
const provider = createLocalProvider({ stateDir, keeperScript: KEEPER_SCRIPT }) as LocalProvider;
const templates = createLocalTemplates({ stateDir });
const tarball = makeMiniRootTar();
await templates.importRoot('mini', tarball);

function report(line: string): void {
  process.stderr.write(`[templates bench] ${line}\n`);
}

const live = new Set<string>();
// vitest runs no hooks in benchmark mode: end what is left when the worker ends.
function releaseAll(): void {
  for (const id of live) {
    const rec = readKeeperRecord(`${stateDir}/local/${id}`);
    if (rec) signalIfAlive(rec.keeper, 'SIGTERM');
  }
  rmSync(tarball, { force: true });
}
process.once('exit', releaseAll);
process.once('SIGTERM', () => {
  releaseAll();
  process.exit(0);
});

async function createKill(template: string | undefined): Promise<void> {
  const m = await provider.create({ timeoutS: 60, ...(template ? { template } : {}) });
  await provider.kill(m.sandbox_id);
}

// create+kill, base and template alternating (the order flipped each round), after a warm-up of each.
await createKill(undefined);
await createKill('mini');
const onBase: number[] = [];
const onTemplate: number[] = [];
for (let i = 0; i < 15; i++) {
  const order = i % 2 === 0 ? [undefined, 'mini'] : ['mini', undefined];
  for (const template of order) (template ? onTemplate : onBase).push(await timed(() => createKill(template)));
}
report(
  `create+kill on a template vs base: median ${median(onTemplate).toFixed(1)} vs ${median(onBase).toFixed(1)} ms, ` +
    `ratio ${(median(onTemplate) / median(onBase)).toFixed(2)}x (15 runs each, interleaved; target <= 1.2x)`,
);

// Snapshot of 104 MiB of new files.
const sb = (await provider.create({ template: 'mini', timeoutS: 600 })).sandbox_id;
live.add(sb);
const fill = await provider.exec(
  sb,
  'mkdir -p ~/big ~/small && for i in $(seq 1 100); do dd if=/dev/urandom of=~/big/$i bs=1M count=1 status=none; done && ' +
    'for i in $(seq 1 1000); do echo "small file $i" > ~/small/$i; done && du -sm ~/big ~/small',
  { timeoutS: 300 },
);
if (fill.exitCode !== 0) throw new Error(`filling the sandbox failed: ${fill.stderr.toString()}`);
// Beside each snapshot, a bare `cp -a` of the same writable layer into the same filesystem: what
// the copy alone costs on this machine at this moment.
const upper = liveWritableLayer(join(stateDir, 'local', sb))!.upperDir;
const snapshotMs: number[] = [];
const bareCopyMs: number[] = [];
let snapshotBytes = 0;
for (let i = 0; i < 3; i++) {
  const dest = mkdtempSync(join(stateDir, 'bare-copy-'));
  bareCopyMs.push(await timed(async () => execFileSync('cp', ['-a', `${upper}/.`, dest])));
  rmSync(dest, { recursive: true, force: true });
  snapshotMs.push(
    await timed(async () => {
      snapshotBytes = (await provider.snapshot(sb, `snap-${i}`)).sizeBytes ?? 0;
    }),
  );
  await templates.remove(`snap-${i}`);
}
await provider.kill(sb);
live.delete(sb);
report(
  `snapshot of a sandbox holding ${(snapshotBytes / 1024 / 1024).toFixed(0)} MiB of new files (1100 files): median ${median(snapshotMs).toFixed(0)} ms ` +
    `(runs ${snapshotMs.map((x) => x.toFixed(0)).join(', ')}); a bare cp -a of the same layer ${median(bareCopyMs).toFixed(0)} ms, ` +
    `ratio ${(median(snapshotMs) / median(bareCopyMs)).toFixed(2)}x (3 runs each, interleaved; target <= 2000 ms)`,
);

// The tests' Debian template, built as the slow test builds it.
const cache = join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'sandbox-mcp-tests', 'debian-packages');
let phases = '';
let last = performance.now();
const buildMs = await timed(() =>
  templates.buildDebian(
    'bench-debian',
    { suite: 'stable', packages: [], mirror: 'http://deb.debian.org/debian', packageCache: cache },
    {
      onOutput: (line) => {
        if (!line.startsWith('I: ')) return;
        const now = performance.now();
        phases += `${((now - last) / 1000).toFixed(1)} s before "${line.slice(3, 40)}"; `;
        last = now;
      },
    },
  ),
);
const built = (await templates.inspect('bench-debian')).size_bytes;
await templates.remove('bench-debian');
report(
  `mmdebstrap build of the tests' template (apt variant, package cache warm after a first run): ${(buildMs / 1000).toFixed(1)} s, ` +
    `${(built / 1024 / 1024).toFixed(0)} MiB`,
);
report(`build phases: ${phases}`);

describe('templates', () => {
  bench('create + kill on a template', () => createKill('mini'), { time: 1000, warmupIterations: 1 });
  bench('create + kill on base', () => createKill(undefined), { time: 1000, warmupIterations: 1 });
});
