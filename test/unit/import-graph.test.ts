// The source tree's import graph: no circles (type-only imports count: a type two modules need
// belongs in the lower one), and the layers depend one way. Read from the sources with the
// TypeScript compiler's pre-processor, so `import type` and dynamic `import()` are seen too.
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { REPO } from '../support/paths.js';

/** Every .ts file under the given top-level folders, repository-relative. */
function sources(...folders: string[]): string[] {
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const name of readdirSync(join(REPO, dir))) {
      const path = join(dir, name);
      if (statSync(join(REPO, path)).isDirectory()) walk(path);
      else if (path.endsWith('.ts')) out.push(path);
    }
  };
  for (const f of folders) walk(f);
  return out;
}

/** file → the repository files it imports (relative specifiers only; packages are not ours). */
export function importGraph(files: readonly string[]): Map<string, string[]> {
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const info = ts.preProcessFile(readFileSync(join(REPO, file), 'utf8'), true, true);
    const targets = info.importedFiles
      .map((i) => i.fileName)
      .filter((spec) => spec.startsWith('.'))
      .map((spec) => relative(REPO, join(REPO, dirname(file), spec)).replace(/\.js$/, '.ts'))
      .filter((target) => known.has(target));
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

/** The strongly connected components with more than one file (or a file importing itself). */
export function circles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  let index = 0;
  const stack: string[] = [];
  const onStack = new Set<string>();
  const indices = new Map<string, number>();
  const low = new Map<string, number>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    indices.set(v, index);
    low.set(v, index);
    index++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!indices.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, indices.get(w)!));
    }
    if (low.get(v) === indices.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!indices.has(v)) visit(v);
  return found;
}

/** The top-level room of a host file: `host/cli/ls.ts` → `cli`; `host/main.ts` → `main.ts`. */
function room(file: string): string {
  return file.split('/')[1]!;
}

/**
 * Which rooms of host/ each room may import from. Lower layers never import higher ones: the
 * command line and the serving process sit on top, then the dashboard (a web page over the MCP
 * server's tools), then the MCP server, then access and tasks,
 * then the providers, with configuration beside them and util/ and shared/ below everything.
 */
const MAY_IMPORT: Record<string, readonly string[]> = {
  'main.ts': ['cli', 'util'],
  cli: ['serve', 'dashboard', 'mcp', 'access', 'tasks', 'config', 'providers', 'util'],
  serve: ['dashboard', 'mcp', 'access', 'tasks', 'config', 'providers', 'util'],
  dashboard: ['mcp', 'access', 'tasks', 'config', 'providers', 'util'],
  mcp: ['access', 'tasks', 'config', 'providers', 'util'],
  access: ['config', 'providers', 'util'],
  tasks: ['providers', 'util'],
  config: ['providers', 'util'],
  providers: ['util'],
  util: [],
};

describe('the import graph', () => {
  it('has no circles in host/, agent/ or shared/ (type-only imports included)', () => {
    const graph = importGraph(sources('host', 'agent', 'shared'));
    expect(graph.size).toBeGreaterThan(100);
    expect(circles(graph)).toEqual([]);
  });

  it('finds a circle when there is one (the check itself works)', () => {
    const graph = new Map([
      ['a.ts', ['b.ts']],
      ['b.ts', ['c.ts']],
      ['c.ts', ['a.ts']],
      ['d.ts', ['a.ts']],
    ]);
    expect(circles(graph)).toEqual([['a.ts', 'b.ts', 'c.ts']]);
  });

  it('keeps host/ layered: each room imports only the rooms below it, and shared/ and agent/ never import host/', () => {
    const graph = importGraph(sources('host', 'agent', 'shared'));
    const wrong: string[] = [];
    for (const [file, targets] of graph) {
      for (const target of targets) {
        const [fromTop, toTop] = [file.split('/')[0], target.split('/')[0]];
        if (fromTop !== 'host') {
          if (toTop === 'host' || (fromTop === 'shared' && toTop === 'agent')) wrong.push(`${file} -> ${target}`);
          continue;
        }
        if (toTop !== 'host') continue;
        const [from, to] = [room(file), room(target)];
        if (from !== to && !(MAY_IMPORT[from] ?? []).includes(to)) wrong.push(`${file} -> ${target}`);
      }
    }
    expect(wrong).toEqual([]);
    expect(Object.keys(MAY_IMPORT).sort()).toEqual([...new Set([...graph.keys()].filter((f) => f.startsWith('host/')).map(room))].sort());
  });
});
