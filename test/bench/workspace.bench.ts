// Benchmarks of local workspaces (`npm run bench`): create+kill with a 10 000-file, 200 MiB
// workspace against create+kill without one, interleaved in one run (target: at most 1.2x), and
// workspace_changes (the host reading the overlay's upper and merged view itself, and its
// host_changed check) on 100 changed files of that tree, with and without the patch.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bench, describe } from 'vitest';
import { createLocalProvider } from '../../host/providers/local/local-provider.js';
import { readKeeperRecord } from '../../host/providers/local/sandbox/state-dir.js';
import { signalIfAlive } from '../../host/providers/local/system/proc.js';
import { loadAgentBundle } from '../../host/providers/agent-bundle.js';
import { AgentClient } from '../../host/tasks/agent-client.js';
import { readWorkspaceChanges } from '../../host/tasks/workspace-changes.js';
import { KEEPER_SCRIPT, REPO } from '../support/paths.js';
import { requireSandboxes } from '../support/prerequisites.js';
import { tempStateDir } from '../support/state-dir.js';
import { median, timed } from '../support/measure.js';

requireSandboxes();
const stateDir = tempStateDir();
const provider = createLocalProvider({ stateDir, keeperScript: KEEPER_SCRIPT });
const agent = new AgentClient(loadAgentBundle(join(REPO, 'dist')));
const tree = mkdtempSync(join(tmpdir(), 'ws-bench-'));
let liveId = '';

function report(line: string): void {
  process.stderr.write(`[workspace bench] ${line}\n`);
}
// vitest runs no hooks in benchmark mode: end what is left when the worker ends.
function releaseAll(): void {
  const rec = liveId ? readKeeperRecord(join(stateDir, 'local', liveId)) : null;
  if (rec) signalIfAlive(rec.keeper, 'SIGTERM');
  rmSync(tree, { recursive: true, force: true });
  rmSync(stateDir, { recursive: true, force: true });
}
process.once('exit', releaseAll);
process.once('SIGTERM', () => {
  releaseAll();
  process.exit(0);
});

// 10 000 files in 100 directories, 200 MiB in all (real bytes: 20 KiB each, and one large file for the rest).
const FILES = 10_000;
const chunk = Buffer.alloc(20 * 1024, 'x');
for (let d = 0; d < 100; d++) {
  mkdirSync(join(tree, `d${d}`));
  for (let f = 0; f < FILES / 100; f++) writeFileSync(join(tree, `d${d}`, `f${f}.txt`), `${d}/${f}\n${chunk.toString()}`);
}
writeFileSync(join(tree, 'big.bin'), Buffer.alloc(200 * 1024 * 1024 - FILES * chunk.length, 1));

const plain: number[] = [];
const withWs: number[] = [];
for (let i = 0; i < 15; i++) {
  for (const [into, opts] of [
    [plain, {}],
    [withWs, { workspace: tree }],
  ] as const) {
    into.push(
      await timed(async () => {
        const m = await provider.create({ timeoutS: 60, ...opts });
        await provider.kill(m.sandbox_id);
      }),
    );
  }
}
report(
  `create+kill with a ${FILES}-file, 200 MiB workspace: median ${median(withWs).toFixed(1)} ms vs ${median(plain).toFixed(1)} ms without, ` +
    `ratio ${(median(withWs) / median(plain)).toFixed(2)}x (15 runs each, interleaved; target <= 1.2x)`,
);

liveId = (await provider.create({ timeoutS: 600, workspace: tree })).sandbox_id;
const edit = await provider.exec(liveId, 'for d in $(seq 0 99); do echo changed >> /workspace/d$d/f0.txt; done', {
  timeoutS: 60,
  cwd: '/workspace',
});
if (edit.exitCode !== 0) throw new Error('the edits failed');
const listOnly: number[] = [];
const withPatch: number[] = [];
for (let i = 0; i < 10; i++) {
  listOnly.push(await timed(() => readWorkspaceChanges(provider, agent, liveId, { patch: false })));
  withPatch.push(await timed(() => readWorkspaceChanges(provider, agent, liveId, { patch: true })));
}
const counted = await readWorkspaceChanges(provider, agent, liveId, { patch: true });
report(
  `workspace_changes on ${counted.counts.modified} changed files of that tree: list ${median(listOnly).toFixed(1)} ms, ` +
    `with the patch (${counted.patch?.length ?? 0} bytes) ${median(withPatch).toFixed(1)} ms (medians of 10)`,
);

describe('local workspace', () => {
  bench(
    'workspace_changes, list only',
    async () => {
      await readWorkspaceChanges(provider, agent, liveId, { patch: false });
    },
    { time: 1000, warmupIterations: 1 },
  );
});
