// Benchmarks of local templates (`npm run bench`), each printing its headline figure:
// - create+kill of a sandbox on a template against one on `base`, interleaved in one run (target:
//   at most 1.2x); the template is a root imported from a tarball of host programs (as the tests'),
// - snapshot_sandbox of a sandbox holding 104 MiB of new files (100 x 1 MiB of random bytes and
//   1000 small files: 19-design.md's measure; target at most 2 s),
// - container images (when skopeo and docker-registry are installed; else said and skipped): the pull
//   of a two-layer image from a registry on the loopback (time, bytes the registry served, bytes the
//   store's layers grew by), a second image on the same base and the same image again (only what is
//   new is fetched, and on a root server stored), and create+kill on the image's template against
//   `base`, interleaved,
// - the mmdebstrap build of the tests' template (apt's variant, one mirror, the tests' package
//   cache: warm after a first run), reported.
// As root (templates run with an id block of their own); NODE_EXTRA_CA_CERTS unset.
// TEMPLATES_BENCH_PART=images runs only the container images' part (and its create+kill pair).
import { homedir } from 'node:os';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { bench, describe } from 'vitest';
import { createLocalProvider, createLocalTemplates, type LocalProvider } from '../../host/providers/local/local-provider.js';
import { liveWritableLayer } from '../../host/providers/local/rootfs/writable-layer.js';
import { readKeeperRecord } from '../../host/providers/local/sandbox/state-dir.js';
import { signalIfAlive } from '../../host/providers/local/system/proc.js';
import { KEEPER_SCRIPT } from '../support/paths.js';
import { makeMiniRootDir, makeMiniRootTar } from '../support/mini-root.js';
import { packLayer, pushLayout, startRegistry, writeOciLayout, type TestRegistry } from '../support/image-fixtures.js';
import { findExecutable } from '../../host/providers/local/system/preflight.js';
import { templatesDir } from '../../host/providers/local/templates/store.js';
import { requireSandboxes } from '../support/prerequisites.js';
import { tempStateDir } from '../support/state-dir.js';
import { median, timed } from '../support/measure.js';

requireSandboxes();
const stateDir = tempStateDir();
const provider = createLocalProvider({ stateDir, keeperScript: KEEPER_SCRIPT }) as LocalProvider;
const templates = createLocalTemplates({ stateDir });
const tarball = makeMiniRootTar();
const onlyImages = process.env.TEMPLATES_BENCH_PART === 'images';
if (!onlyImages) await templates.importRoot('mini', tarball);

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

if (!onlyImages) await benchTemplateAndSnapshot();

async function benchTemplateAndSnapshot(): Promise<void> {
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
}

// Container images: pulls from a registry on the loopback, then sandboxes on the image's template.
/** Bytes of blobs and manifests the registry served (200s of GETs in its access log) after `from` characters of it. */
function servedBytes(registry: TestRegistry, from: number): number {
  let bytes = 0;
  for (const m of registry
    .log()
    .slice(from)
    .matchAll(/"GET \/v2\/\S+\/(?:blobs|manifests)\/\S+ HTTP\/[\d.]+" 200 (\d+)/g))
    bytes += Number(m[1]);
  return bytes;
}

async function benchImages(): Promise<void> {
  const missing = ['skopeo', 'docker-registry'].filter((p) => findExecutable(p) === null);
  if (missing.length > 0) {
    report(`container images: skipped (${missing.join(' and ')} not installed)`);
    return;
  }
  const registry = await startRegistry();
  try {
    // A two-layer image (the tests' mini root, then 4 MiB of an application), and a second on the same base.
    const base = packLayer(makeMiniRootDir());
    const layerOf = (name: string) => {
      const dir = mkdtempSync(join(stateDir, 'layer-'));
      mkdirSync(join(dir, 'app'));
      writeFileSync(join(dir, 'app', name), randomBytes(4 << 20));
      return packLayer(dir);
    };
    const config = { Env: ['FOO=from-image'], WorkingDir: '/app' };
    await pushLayout(writeOciLayout([{ layers: [base, layerOf('one')], config }]), registry, 'app:1');
    await pushLayout(writeOciLayout([{ layers: [base, layerOf('two')], config }]), registry, 'app2:1');
    const blobs = join(templatesDir(stateDir), 'images', 'blobs');
    const layersDir = join(templatesDir(stateDir), 'layers');
    // The store's layers on disk (du: apparent sizes, each inode once).
    const stored = () =>
      existsSync(layersDir)
        ? Number(execFileSync('du', ['-s', '-B1', '--apparent-size', layersDir], { encoding: 'utf8' }).split('\t')[0])
        : 0;
    const pull = async (name: string, repoTag: string): Promise<{ ms: number; bytes: number; storedBytes: number }> => {
      const mark = registry.log().length;
      const before = stored();
      const ms = await timed(() => templates.pullImage(name, `${registry.host}/${repoTag}`));
      return { ms, bytes: servedBytes(registry, mark), storedBytes: stored() - before };
    };
    // Cold: the shared blob cache emptied before each of 3 pulls (and the store's layers: each template removed but the last).
    const cold: { ms: number; bytes: number; storedBytes: number }[] = [];
    for (let i = 0; i < 3; i++) {
      rmSync(blobs, { recursive: true, force: true });
      cold.push(await pull(`image-cold-${i}`, 'app:1'));
      if (i < 2) await templates.remove(`image-cold-${i}`);
    }
    const second = await pull('image-second', 'app2:1');
    const again = await pull('image-again', 'app:1');
    const mib = (b: number) => `${(b / 1024 / 1024).toFixed(2)} MiB (${b} bytes)`;
    report(
      `pull of a two-layer image (${mib(base.length)} base + 4 MiB layer, uncompressed; cold cache): median ${median(cold.map((c) => c.ms)).toFixed(0)} ms ` +
        `(runs ${cold.map((c) => c.ms.toFixed(0)).join(', ')}), ${mib(cold[0]!.bytes)} served by the registry, ${mib(cold[0]!.storedBytes)} stored`,
    );
    report(
      `a second image on the same base: ${second.ms.toFixed(0)} ms, ${mib(second.bytes)} served (its new layer, config and manifest), ` +
        `${mib(second.storedBytes)} stored; the same image again: ${again.ms.toFixed(0)} ms, ${mib(again.bytes)} served, ${mib(again.storedBytes)} stored`,
    );
    await createKill('image-again');
    const onImage: number[] = [];
    const onBaseToo: number[] = [];
    for (let i = 0; i < 9; i++) {
      const order = i % 2 === 0 ? [undefined, 'image-again'] : ['image-again', undefined];
      for (const template of order) (template ? onImage : onBaseToo).push(await timed(() => createKill(template)));
    }
    report(
      `create+kill on an image template vs base: median ${median(onImage).toFixed(1)} vs ${median(onBaseToo).toFixed(1)} ms, ` +
        `ratio ${(median(onImage) / median(onBaseToo)).toFixed(2)}x (9 runs each, interleaved)`,
    );
  } finally {
    await registry.stop();
  }
}
await benchImages();

if (!onlyImages) await benchDebianBuild();

async function benchDebianBuild(): Promise<void> {
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
}

describe('templates', () => {
  const template = onlyImages ? 'image-again' : 'mini';
  bench('create + kill on a template', () => createKill(template), { time: 1000, warmupIterations: 1 });
  bench('create + kill on base', () => createKill(undefined), { time: 1000, warmupIterations: 1 });
});
