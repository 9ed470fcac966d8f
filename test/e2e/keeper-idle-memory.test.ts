// An idle keeper gives its start-up garbage back within seconds of its sandbox's creation, on every
// supported line: on Node 20 V8's memory reducer does (its first round 3 s after the start:
// keeper/node-flags.ts memoryReducerFlags); on Node 22 and later the keeper's own one collection
// (keeper/startup-garbage.ts), where the reducer's round comes some 8 s after the start (22) or
// never (24, 26: a keeper's old generation never grows enough to start it). Counted in the
// keeper's anonymous memory (smaps_rollup's `Anonymous`: its own pages, which other processes do
// not share, unlike PSS), read right after create_sandbox and 6 s later.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { readKeeperRecord } from '../../host/providers/local/sandbox/state-dir.js';
import { localServer, ok } from '../support/built-server.js';
import { sleep } from '../support/wait.js';

const s = localServer();

/** The anonymous memory of `pid`, in KiB. */
function anonymousKiB(pid: number): number {
  const rollup = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
  return Number(/^Anonymous:\s+(\d+) kB/m.exec(rollup)?.[1] ?? NaN);
}

it("gives an idle keeper's start-up garbage back within 6 s of its sandbox's creation", async () => {
  const id = (await ok(s.client, 'create_sandbox', { timeout: 300 })).sandbox_id as string;
  const rec = readKeeperRecord(join(s.stateDir, 'local', id.replace(/^local:/, '')));
  if (!rec) throw new Error('no keeper record');
  const early = anonymousKiB(rec.keeper.pid);
  await sleep(6000);
  const late = anonymousKiB(rec.keeper.pid);
  // Half a MiB at least (the collection gave 0.9-1.8 MiB of PSS back on Node 22-26; without it the
  // keeper's anonymous memory rose by 36-40 KiB there).
  expect(early - late).toBeGreaterThanOrEqual(512);
  await ok(s.client, 'kill_sandbox', { sandbox_id: id });
});
