// The page and its two files, as the build wrote them (dist/dashboard/): no data, so they need
// no session; read once per process.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { distDir } from '../util/dist-files.js';

/** Each path the page is served at, with its file in dist/dashboard/ and its type. */
const ASSETS: Readonly<Record<string, { file: string; type: string }>> = {
  '/': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/assets/dashboard.js': { file: 'dashboard.js', type: 'text/javascript; charset=utf-8' },
  '/assets/dashboard.css': { file: 'dashboard.css', type: 'text/css; charset=utf-8' },
};

const cache = new Map<string, Buffer>();

/** The asset served at `path` (its bytes and content type), or undefined for any other path. */
export function assetAt(path: string): { bytes: Buffer; type: string } | undefined {
  const asset = Object.hasOwn(ASSETS, path) ? ASSETS[path] : undefined;
  if (!asset) return undefined;
  let bytes = cache.get(asset.file);
  if (!bytes) {
    bytes = readFileSync(join(distDir(), 'dashboard', asset.file));
    cache.set(asset.file, bytes);
  }
  return { bytes, type: asset.type };
}
