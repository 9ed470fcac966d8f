// Where the build's outputs are at run time: the folder holding dist/host.js (this module is
// bundled into it or into one of its chunks), or the repository's dist/ when run from sources
// (tests import the modules directly).
import { existsSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The dist/ folder of this installation or checkout. */
export function distDir(moduleUrl: string = import.meta.url): string {
  const here = dirname(fileURLToPath(moduleUrl));
  if (basename(here) === 'dist') return here;
  if (basename(here) === 'chunks' && basename(dirname(here)) === 'dist') return dirname(here);
  for (let dir = here; dir !== dirname(dir); dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json')) && existsSync(join(dir, 'dist'))) return join(dir, 'dist');
  }
  return join(here, 'dist');
}
