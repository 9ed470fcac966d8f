// The writers of the template store (store.ts holds the format and the readers). Every change is
// atomic for the readers, and anything half-made is recognisably so and removed by whoever finds it:
//   - a name is claimed first, exclusively (`.claims/<name>`, created O_EXCL, naming its process by
//     pid and start time and the layers the template will list), so two commands never make the
//     same template and a removal never collects a layer a template being made will list;
//   - a layer is filled under `layers/.tmp-<pid>-<start>-<random>/` and renamed into place once its
//     files and its layer.json are complete;
//   - a record is written to a temp file and linked to `<name>.json` (a link fails where a name
//     exists: publishing is exclusive too), then the temp name is dropped;
//   - a removal renames the record away, checks again that no sandbox took the template meanwhile,
//     then drops it and the layers no record or claim lists any more (renamed to `.gone-*` first).
// A process that died mid-way leaves only `.tmp-*`, `.gone-*` or a claim of a dead process:
// sweepStale removes them (never one of a live process) before every change.
import { randomBytes } from 'node:crypto';
import {
  closeSync,
  fsyncSync,
  linkSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import { ProviderError } from '../../provider-error.js';
import { identify, isAlive, type ProcIdentity } from '../system/proc.js';
import { removeTree, treeSizeBytes } from './file-tree.js';
import { templateBeingMade, templateExists, templateInUse, templateNotFound, templatesDirNotPrivate } from './refusals.js';
import {
  isStorableTemplateRef,
  LAYER_ID_PATTERN,
  LayerRecordSchema,
  listTemplates,
  readTemplate,
  templateFileStem,
  templateRef,
  type LayerOwners,
  type LayerRecord,
  type TemplateRecord,
} from './store.js';

const CLAIMS = '.claims';
const LAYERS = 'layers';
/** `.tmp-<pid>-<start time>-<random>[.json]`: work in progress of the process named. */
const TMP_NAME = /^\.tmp-(\d+)-(\d+)-[0-9a-f]+(?:\.json)?$/;

/** This process as a name part of what it is making (`<pid>-<start time>`). */
function selfTag(): string {
  const self = identify(process.pid);
  if (!self) throw new ProviderError('internal');
  return `${self.pid}-${self.startTime}`;
}

/** A temp name for work of this process (`.tmp-<pid>-<start>-<random>`): swept once the process is gone. */
export function newTmpName(suffix = ''): string {
  return tmpName(suffix);
}

function tmpName(suffix = ''): string {
  return `.tmp-${selfTag()}-${randomBytes(6).toString('hex')}${suffix}`;
}

/** True for `.tmp-*` of a process that no longer runs. */
function isStaleTmp(name: string): boolean {
  const m = TMP_NAME.exec(name);
  return m !== null && !isAlive({ pid: Number(m[1]), startTime: m[2]! });
}

/**
 * Creates the templates directory (0700) and its `layers/`, and checks that both are directories
 * of this user that nobody else can enter: layers hold setuid files of the templates' own.
 */
export function ensureTemplatesDir(dir: string): void {
  mkdirSync(join(dir, LAYERS), { recursive: true, mode: 0o700 });
  mkdirSync(join(dir, CLAIMS), { mode: 0o700, recursive: true });
  assertPrivateTemplates(dir);
}

/** Throws permission_denied unless the templates directory (when it exists) is this user's alone. */
export function assertPrivateTemplates(dir: string): void {
  const uid = process.geteuid?.() ?? 0;
  for (const path of [dir, join(dir, LAYERS)]) {
    let st;
    try {
      st = lstatSync(path);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw e;
    }
    if (!st.isDirectory() || st.uid !== uid || (st.mode & 0o077) !== 0) throw templatesDirNotPrivate();
  }
}

/** Writes a file and flushes it to disk before anyone can find it under its final name. */
function writeDurably(path: string, text: string, flag: 'w' | 'wx' = 'w'): void {
  const fd = openSync(path, flag, 0o600);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** A claimed name (a template's reference): the template being made under it, until it is published or given up. */
export interface NameClaim {
  readonly name: string;
  /** Adds a layer the template will list (before the layer is renamed into place). */
  addLayer(id: string): void;
  /** Gives the name up (after publishing, or on failure). */
  release(): void;
}

interface ClaimFile {
  owner: ProcIdentity;
  layers: string[];
}

function readClaim(path: string): ClaimFile | null {
  try {
    const claim = JSON.parse(readFileSync(path, 'utf8')) as ClaimFile;
    return typeof claim.owner?.pid === 'number' && Array.isArray(claim.layers) ? claim : null;
  } catch {
    return null;
  }
}

/**
 * Claims `name` for a template this process is about to make, listing the existing layers it will
 * build on (a snapshot's parent's). Throws conflict when the name is taken or being made by a live
 * process; a claim of a dead one is taken over.
 */
export function claimName(dir: string, name: string, baseLayers: readonly string[]): NameClaim {
  if (!isStorableTemplateRef(name)) throw new ProviderError('invalid_argument');
  const self = identify(process.pid);
  if (!self) throw new ProviderError('internal');
  const path = join(dir, CLAIMS, templateFileStem(name));
  const claim: ClaimFile = { owner: self, layers: [...baseLayers] };
  for (let attempt = 0; ; attempt++) {
    try {
      writeDurably(path, JSON.stringify(claim), 'wx');
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST' || attempt > 0) throw e;
      const held = readClaim(path);
      if (held && isAlive(held.owner)) throw templateBeingMade();
      rmSync(path, { force: true });
    }
  }
  if (readTemplate(dir, name)) {
    rmSync(path, { force: true });
    throw templateExists();
  }
  return {
    name,
    addLayer(id) {
      claim.layers.push(id);
      const tmp = join(dir, CLAIMS, tmpName());
      writeDurably(tmp, JSON.stringify(claim));
      renameSync(tmp, path);
    },
    release() {
      rmSync(path, { force: true });
    },
  };
}

/** The layers every live claim will list. */
function claimedLayers(dir: string): Set<string> {
  const layers = new Set<string>();
  for (const name of safeReaddir(join(dir, CLAIMS))) {
    if (name.startsWith('.')) continue;
    const claim = readClaim(join(dir, CLAIMS, name));
    if (claim && isAlive(claim.owner)) for (const id of claim.layers) layers.add(id);
  }
  return layers;
}

function safeReaddir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/** The record of layer `id`, or undefined. */
export function readLayer(dir: string, id: string): LayerRecord | undefined {
  try {
    const parsed = LayerRecordSchema.safeParse(JSON.parse(readFileSync(join(dir, LAYERS, id, 'layer.json'), 'utf8')));
    return parsed.success && parsed.data.id === id ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Makes a new layer for the claimed template: `fill` puts its files into the directory it is
 * given (which does not exist yet), then the layer's size is counted, its record written and the
 * whole renamed into place. On any failure nothing of it remains.
 */
export async function makeLayer(
  dir: string,
  claim: NameClaim,
  owners: LayerOwners,
  fill: (root: string) => Promise<void>,
): Promise<LayerRecord> {
  const tmp = join(dir, LAYERS, tmpName());
  mkdirSync(tmp, { mode: 0o700 });
  try {
    const root = join(tmp, 'root');
    await fill(root);
    const record: LayerRecord = {
      format: 1,
      id: randomBytes(8).toString('hex'),
      created_at: new Date().toISOString(),
      size_bytes: treeSizeBytes(root),
      owners,
    };
    writeDurably(join(tmp, 'layer.json'), JSON.stringify(record, null, 2) + '\n');
    claim.addLayer(record.id);
    renameSync(tmp, join(dir, LAYERS, record.id));
    return record;
  } catch (e) {
    removeTree(tmp);
    throw e;
  }
}

/**
 * The layer `id` for the claimed template, shared with every template that lists it: an image
 * layer, whose id its chain id and owners give (`image.chain_id`). It is added to the claim before
 * it is looked for, so a removal that finds it unlisted afterwards puts it back
 * (removeUnlistedLayers); one that is there with that chain id and owners is reused as it is,
 * else `fill` makes it as makeLayer does and it is renamed into place, unless another process
 * put it there first (then that one is reused and this copy dropped). `reused`: nothing was made.
 */
export async function makeSharedLayer(
  dir: string,
  claim: NameClaim,
  id: string,
  owners: LayerOwners,
  image: { chain_id: string },
  fill: (root: string) => Promise<{ opaqueDirs: string[] }>,
): Promise<{ record: LayerRecord; reused: boolean }> {
  if (!LAYER_ID_PATTERN.test(id)) throw new ProviderError('internal', { code: 'layer_id_invalid' });
  claim.addLayer(id);
  const existing = (): LayerRecord | undefined => {
    const record = readLayer(dir, id);
    if (record === undefined) return undefined;
    if (record.image?.chain_id !== image.chain_id || record.owners !== owners)
      throw new ProviderError('internal', {
        code: 'layer_id_taken',
        detail: `The store's layer ${id} is not the image layer its id names.`,
      });
    return record;
  };
  const found = existing();
  if (found) return { record: found, reused: true };
  const tmp = join(dir, LAYERS, tmpName());
  mkdirSync(tmp, { mode: 0o700 });
  try {
    const root = join(tmp, 'root');
    const { opaqueDirs } = await fill(root);
    const record: LayerRecord = {
      format: 1,
      id,
      created_at: new Date().toISOString(),
      size_bytes: treeSizeBytes(root),
      owners,
      image: { chain_id: image.chain_id, opaque_dirs: opaqueDirs },
    };
    writeDurably(join(tmp, 'layer.json'), JSON.stringify(record, null, 2) + '\n');
    try {
      renameSync(tmp, join(dir, LAYERS, id));
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      const raced = code === 'ENOTEMPTY' || code === 'EEXIST' ? existing() : undefined;
      if (!raced) throw e;
      removeTree(tmp);
      return { record: raced, reused: true };
    }
    return { record, reused: false };
  } catch (e) {
    removeTree(tmp);
    throw e;
  }
}

/** How long a template waits for a layer it lists that a removal has taken aside (and is putting back). */
const LAYER_PUT_BACK_WAIT_MS = 2_000;

/**
 * Waits until every layer in `ids` is in place: a removal that found one unlisted just before this
 * process's claim listed it renames it aside and puts it back on seeing the claim. Throws internal
 * (template_layer_missing) for one still missing after LAYER_PUT_BACK_WAIT_MS.
 */
export async function awaitLayers(dir: string, ids: readonly string[]): Promise<void> {
  const deadline = Date.now() + LAYER_PUT_BACK_WAIT_MS;
  for (const id of ids) {
    while (readLayer(dir, id) === undefined) {
      if (Date.now() > deadline) throw new ProviderError('internal', { code: 'template_layer_missing' });
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

/**
 * Publishes a template's record under its claimed name: exclusive (a name that exists is never
 * replaced), and only once complete on disk. Releases the claim.
 */
export function publishTemplate(dir: string, claim: NameClaim, record: TemplateRecord): void {
  const tmp = join(dir, tmpName('.json'));
  try {
    writeDurably(tmp, JSON.stringify(record, null, 2) + '\n');
    linkSync(tmp, join(dir, `${templateFileStem(templateRef(record))}.json`));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') throw templateExists();
    throw e;
  } finally {
    rmSync(tmp, { force: true });
  }
  claim.release();
}

/**
 * Removes template `name` once `isInUse` says no live sandbox runs on it (asked again after the
 * record is out of sight, for a create that read it just before), then the layers that no other
 * template lists. Throws not_found or conflict (in use) and then changes nothing.
 */
export async function removeTemplate(dir: string, name: string, isInUse: (name: string) => Promise<boolean>): Promise<void> {
  if (!readTemplate(dir, name)) throw templateNotFound();
  if (await isInUse(name)) throw templateInUse();
  const path = join(dir, `${templateFileStem(name)}.json`);
  const away = join(dir, tmpName('.json'));
  try {
    renameSync(path, away);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') throw templateNotFound();
    throw e;
  }
  if (await isInUse(name)) {
    // Put back; a name published meanwhile wins (the link fails) and this one is dropped.
    try {
      linkSync(away, path);
    } finally {
      rmSync(away, { force: true });
    }
    throw templateInUse();
  }
  rmSync(away, { force: true });
  removeUnlistedLayers(dir);
}

/** The layers some template record or live claim lists. */
function listedLayers(dir: string): Set<string> {
  const listed = claimedLayers(dir);
  for (const t of listTemplates(dir)) for (const id of t.layers) listed.add(id);
  return listed;
}

/**
 * Removes every layer that no template record and no live claim lists. The layers are listed
 * before the records and claims are read: a layer renamed into place later is not looked at,
 * one renamed earlier is already in its claim. A layer shared by id (an image layer) may be
 * claimed by a template being made after the records were read: each is taken aside (a `.tmp-*`
 * name of this process, which no sweep removes while it runs) and the claims read again; one
 * listed now is put back (unless its maker put a copy there meanwhile, which stays).
 */
export function removeUnlistedLayers(dir: string): number {
  const layers = safeReaddir(join(dir, LAYERS)).filter((n) => LAYER_ID_PATTERN.test(n));
  const listed = listedLayers(dir);
  let removed = 0;
  for (const id of layers) {
    if (listed.has(id)) continue;
    const aside = join(dir, LAYERS, tmpName());
    try {
      renameSync(join(dir, LAYERS, id), aside);
    } catch {
      continue;
    }
    if (listedLayers(dir).has(id)) {
      try {
        renameSync(aside, join(dir, LAYERS, id));
        continue;
      } catch {
        // Its maker put it back first: that copy stays.
      }
    }
    removeTree(aside);
    removed++;
  }
  return removed;
}

/** How old an unreadable claim must be before a sweep drops it. */
const UNREADABLE_CLAIM_GRACE_MS = 60_000;

function isOlderThan(path: string, ms: number): boolean {
  try {
    return Date.now() - statSync(path).mtimeMs > ms;
  } catch {
    return false;
  }
}

/** Removes what dead processes left half-made: `.tmp-*` layers and records, `.gone-*` layers, their claims. */
export function sweepStale(dir: string): void {
  for (const name of safeReaddir(join(dir, LAYERS))) {
    if (name.startsWith('.gone-') || isStaleTmp(name)) removeTree(join(dir, LAYERS, name));
  }
  for (const name of safeReaddir(dir)) if (isStaleTmp(name)) rmSync(join(dir, name), { force: true });
  // Pulls' layouts (their blobs are kept: a shared cache by digest).
  for (const name of safeReaddir(join(dir, 'images')))
    if (isStaleTmp(name)) rmSync(join(dir, 'images', name), { recursive: true, force: true });
  for (const name of safeReaddir(join(dir, CLAIMS))) {
    const path = join(dir, CLAIMS, name);
    if (name.startsWith('.')) {
      if (isStaleTmp(name)) rmSync(path, { force: true });
      continue;
    }
    const claim = readClaim(path);
    // An unreadable claim may be one being written this instant: only an old one is dropped.
    if (claim ? !isAlive(claim.owner) : isOlderThan(path, UNREADABLE_CLAIM_GRACE_MS)) rmSync(path, { force: true });
  }
  removeUnlistedLayers(dir);
}
