// The template store's on-disk contract (host/providers/local/templates/store.ts): names, records,
// and the lowerdir order a sandbox's overlay takes.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  isStorableTemplateName,
  layerRoot,
  listTemplates,
  readTemplate,
  templateLowerDirs,
  templatesDir,
  type TemplateRecord,
} from '../../host/providers/local/templates/store.js';
import { scratchDir } from '../support/scratch.js';

const record = (name: string, layers: string[]): TemplateRecord => ({
  format: 1,
  name,
  source: { kind: 'import', from: 'root.tar', format: 'tar' },
  created_at: '2026-12-01T00:00:00.000Z',
  size_bytes: 4096,
  layers,
  owners: 'native',
});

describe('the template store', () => {
  it('accepts lowercase names of letters, digits, . _ -, and refuses base, upper case, paths and empty names', () => {
    for (const ok of ['py', 'python3.12', 'a', 'deb_12-slim', '0x']) expect(isStorableTemplateName(ok)).toBe(true);
    for (const bad of ['base', '', 'Py', '../x', 'a/b', '.hidden', '-x', 'x'.repeat(64), 'x.json']) {
      expect(isStorableTemplateName(bad)).toBe(false);
    }
  });

  it('reads the records it finds, top layer first, and ignores what is not a valid record of that name', () => {
    const dir = scratchDir('templates-');
    writeFileSync(join(dir, 'py.json'), JSON.stringify(record('py', ['00000000000000aa', '00000000000000bb'])));
    writeFileSync(join(dir, 'other.json'), JSON.stringify(record('py', ['00000000000000aa'])));
    writeFileSync(join(dir, 'broken.json'), '{');
    writeFileSync(join(dir, 'nolayers.json'), JSON.stringify(record('nolayers', [])));
    mkdirSync(join(dir, 'layers'));
    expect(readTemplate(dir, 'py')?.layers).toEqual(['00000000000000aa', '00000000000000bb']);
    for (const name of ['other', 'broken', 'nolayers', 'missing', '../py']) expect(readTemplate(dir, name)).toBeUndefined();
    expect(listTemplates(dir).map((t) => t.name)).toEqual(['py']);
    expect(templateLowerDirs(dir, readTemplate(dir, 'py')!)).toEqual([
      layerRoot(dir, '00000000000000aa'),
      layerRoot(dir, '00000000000000bb'),
    ]);
    expect(listTemplates(join(dir, 'none'))).toEqual([]);
  });

  it('lives in the state directory unless configured elsewhere', () => {
    expect(templatesDir('/state')).toBe('/state/templates');
    expect(templatesDir('/state', '/srv/t')).toBe('/srv/t');
  });
});
