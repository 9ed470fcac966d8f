// The Node.js versions this package supports: package.json's `engines.node`, built into the
// bundle (read from package.json when running from sources), and a check of a version against it.
import { readFileSync } from 'node:fs';
import { fail, ok, type Check } from './check.js';

declare const __NODE_ENGINES__: string | undefined;

/** package.json's engines.node, e.g. `>=20.18.1 <21 || >=22`. */
export function supportedNodeRange(): string {
  if (typeof __NODE_ENGINES__ === 'string') return __NODE_ENGINES__;
  const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { engines: { node: string } };
  return pkg.engines.node;
}

function parts(version: string): [number, number, number] {
  const [major = 0, minor = 0, patch = 0] = version
    .replace(/^v/, '')
    .split(/[.-]/)
    .slice(0, 3)
    .map((p) => Number.parseInt(p, 10) || 0);
  return [major, minor, patch];
}

function compare(a: string, b: string): number {
  const x = parts(a);
  const y = parts(b);
  for (let i = 0; i < 3; i++) if (x[i] !== y[i]) return x[i]! - y[i]!;
  return 0;
}

/** True when `version` satisfies `range` (sets of >=, >, <=, <, = comparators joined by `||`). */
export function satisfiesRange(version: string, range: string): boolean {
  return range.split('||').some((set) =>
    set
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .every((comparator) => {
        const m = /^(>=|<=|>|<|=)?v?(\d+(?:\.\d+){0,2})$/.exec(comparator);
        if (!m) return false;
        const c = compare(version, m[2]!);
        switch (m[1]) {
          case '>=':
            return c >= 0;
          case '<=':
            return c <= 0;
          case '>':
            return c > 0;
          case '<':
            return c < 0;
          default:
            return c === 0;
        }
      }),
  );
}

/** The major lines `range` admits (each set's lower bound: >=, > or =), newest first, at most `count`. */
function newestLines(range: string, count: number): number[] {
  const majors = range.split('||').flatMap((set) =>
    set
      .trim()
      .split(/\s+/)
      .flatMap((comparator) => {
        const m = /^(>=|>|=)?v?(\d+)/.exec(comparator);
        return m ? [Number.parseInt(m[2]!, 10)] : [];
      }),
  );
  return [...new Set(majors)].sort((a, b) => b - a).slice(0, count);
}

/** The Node.js running this server against the supported range. */
export function checkNodeVersion(version = process.versions.node, range = supportedNodeRange()): Check {
  if (satisfiesRange(version, range)) return ok('node', `Node.js ${version} (supported: ${range})`);
  // Named from the range itself, so the suggestion moves with engines instead of going stale;
  // the project supports even (LTS) lines only, so the newest it names are LTS lines.
  const lines = newestLines(range, 2);
  const suggestion =
    lines.length === 0 ? '' : `, e.g. Node.js ${lines.join(' or ')}, the newest LTS line${lines.length > 1 ? 's' : ''} it names`;
  return fail('node', `Node.js ${version} is not supported (supported: ${range})`, `install a supported Node.js (${range})${suggestion}`);
}
