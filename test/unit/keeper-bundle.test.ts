// What the per-sandbox keeper loads, read from the built keeper (dist/keeper.cjs): issue 21 keeps a
// keeper and its resident within 20 MiB PSS per idle sandbox, and importing zod (the template
// store's and the resident frames' schemas, built at load) cost each keeper about 4 MiB of heap
// it never used. It relays frames as lines and reads only a template's name.
import { readFileSync } from 'node:fs';
import { beforeAll, expect, it } from 'vitest';
import { KEEPER_SCRIPT } from '../support/paths.js';
import { requireBuild } from '../support/prerequisites.js';

beforeAll(() => requireBuild());

it('the keeper bundle imports no zod, statically or lazily', () => {
  const keeper = readFileSync(KEEPER_SCRIPT, 'utf8');
  const imported = [...keeper.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+|\brequire\s*\(\s*)["']([^"']+)["']/g)].map((m) => m[1]!);
  // The pattern finds the bundle's imports (node's own modules at least): an empty list would prove nothing.
  expect(imported).toContain('node:fs');
  expect(imported.filter((name) => name === 'zod' || name.startsWith('zod/'))).toEqual([]);
});

it("the keeper is one CommonJS file: an ES module costs every idle keeper node's module loader (0.6 MiB on Node 26)", () => {
  expect(KEEPER_SCRIPT.endsWith('.cjs')).toBe(true);
  const keeper = readFileSync(KEEPER_SCRIPT, 'utf8');
  expect(keeper).toMatch(/\brequire\("node:fs"\)/);
  expect(keeper.match(/^(?:import|export)\s.*$/gm) ?? []).toEqual([]);
});
