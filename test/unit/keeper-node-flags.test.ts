// The node flags of the keeper and the resident (host/providers/local/keeper/node-flags.ts): node
// refuses to start on a flag its V8 does not know, so every flag given on a line must be one that
// line's node accepts. CI runs this file on each supported line (Node 20, 22, 24, 26).
import { spawnSync } from 'node:child_process';
import { expect, it } from 'vitest';
import {
  compilerFlags,
  keeperCollectionFlags,
  lineFlags,
  memoryReducerFlags,
  SMALL_HEAP_FLAGS,
  youngGenerationFlags,
} from '../../host/providers/local/keeper/node-flags.js';

it('asks for the young-generation mark-sweep from V8 13 on (Node 24 and later), never before', () => {
  expect(youngGenerationFlags('11.3.244.8-node.38')).toEqual([]); // Node 20: no such flag
  expect(youngGenerationFlags('12.4.254.21-node.57')).toEqual([]); // Node 22: no gain measured
  expect(youngGenerationFlags('13.6.233.17-node.63')).toEqual(['--minor-ms']);
  expect(youngGenerationFlags('14.6.202.34-node.40')).toEqual(['--minor-ms']);
});

it("shortens the memory reducer's first delay on V8 11 (Node 20) only", () => {
  expect(memoryReducerFlags('11.3.244.8-node.38')).toEqual(['--gc-memory-reducer-start-delay-ms=3000']);
  expect(memoryReducerFlags('12.4.254.21-node.57')).toEqual([]); // Node 22: no gain measured
  expect(memoryReducerFlags('13.6.233.17-node.63')).toEqual([]);
  expect(memoryReducerFlags('14.6.202.34-node.40')).toEqual([]); // Node 26: another default (30 s)
});

it('turns Maglev off from V8 13 on (Node 24 and later, where Node turns it on), never before', () => {
  expect(compilerFlags('11.3.244.8-node.38')).toEqual([]);
  expect(compilerFlags('12.4.254.21-node.57')).toEqual([]); // Node 22: Maglev is off already
  expect(compilerFlags('13.6.233.17-node.63')).toEqual(['--no-maglev']);
  expect(compilerFlags('14.6.202.34-node.40')).toEqual(['--no-maglev']);
  expect(lineFlags('14.6.202.34-node.40')).toEqual(['--minor-ms', '--no-maglev']);
  expect(lineFlags('11.3.244.8-node.38')).toEqual(['--gc-memory-reducer-start-delay-ms=3000']);
});

it('exposes gc to the keeper from V8 12 on (Node 22 and later), for its one collection of its start-up garbage', () => {
  expect(keeperCollectionFlags('11.3.244.8-node.38')).toEqual([]); // Node 20: its reducer gives it back
  expect(keeperCollectionFlags('12.4.254.21-node.57')).toEqual(['--expose-gc']);
  expect(keeperCollectionFlags('14.6.202.34-node.40')).toEqual(['--expose-gc']);
});

it("gives only flags the running node's V8 accepts", () => {
  const flags = [...SMALL_HEAP_FLAGS, ...lineFlags(process.versions.v8), ...keeperCollectionFlags(process.versions.v8)];
  const run = spawnSync(process.execPath, [...flags, '-e', 'process.stdout.write("started")'], { encoding: 'utf8' });
  expect(run.stderr).toBe('');
  expect(run.stdout).toBe('started');
  expect(run.status).toBe(0);
});
