// The local provider's templates as the CLI and the snapshot tool use them: list, inspect, remove
// (refused while a live sandbox runs on one), import, build and snapshot. Each change goes through
// the store's writers (store-writer.ts): a name claimed first, a layer made aside and renamed into
// place, a record published exclusively; whatever fails leaves nothing behind.
import { basename, dirname, join } from 'node:path';
import { definedFields } from '../../../util/defined-fields.js';
import { ProviderError } from '../../provider-error.js';
import type { SandboxRegistry } from '../sandbox/registry.js';
import { listSandboxIds, readSpec } from '../sandbox/state-dir.js';
import type { SandboxSpec } from '../sandbox/spec.js';
import type { LocalSettings } from '../settings.js';
import { LOCAL_DETAILS } from '../errors.js';
import { helpersDir, isHelperArch, readHelper } from '../launch/perl-helpers.js';
import { findExecutable, locateTool } from '../system/preflight.js';
import { CopyMeta, type CopyMetaHelper } from './copy-meta.js';
import {
  buildNeedsRoot,
  checkBuildSpec,
  DEBIAN_TEMPLATE_ENV,
  DEBIAN_VARIANT,
  mmdebstrapMissing,
  runMmdebstrap,
  type DebianBuildSpec,
} from './debian-build.js';
import { applyImageLayer, chainIds, imageLayerId, openImage, type ImageOnDisk } from './images/image-import.js';
import { MAX_ACCOUNTS_BYTES, resolveImageUser } from './images/image-user.js';
import { StackView, type StackLayer } from './images/layer-stack.js';
import { parseImageReference, pullToLayout, type PullOpts } from './images/registry-pull.js';
import { classifySource, fillFromSource, layerOwnersHere, notARoot } from './import-root.js';
import { badTemplateName, templateNotFound } from './refusals.js';
import { imageTooManyLayers, sharedTemplateNameTaken, snapshotChainTooLong, snapshotNeedsTemplate } from './refusals.js';
import {
  assertSnapshotFits,
  fillFromWritableLayer,
  MAX_TEMPLATE_LAYERS,
  snapshotGrewPastCap,
  snapshotSizeBytes,
  snapshotStorageBytes,
  type SnapshotRules,
  type WritableLayerView,
} from './snapshot.js';
import {
  isStorableTemplateName,
  isStorableTemplateRef,
  layerRoot,
  listTemplates,
  readTemplate,
  templateRef,
  type LayerRecord,
  type TemplateRecord,
  type TemplateSource,
} from './store.js';
import {
  awaitLayers,
  claimName,
  ensureTemplatesDir,
  makeLayer,
  makeSharedLayer,
  publishTemplate,
  readLayer,
  removeTemplate,
  removeUnlistedLayers,
  sweepStale,
} from './store-writer.js';

/** A template and the live sandboxes (unqualified ids) running on it. */
export type TemplateDetails = TemplateRecord & { used_by: string[] };

/** The name of the template a sandbox runs on, from its spec (absent: `base`). */
export function specTemplateName(spec: SandboxSpec): string | undefined {
  const template = (spec as { template?: unknown }).template;
  if (typeof template === 'string') return template;
  const name = (template as { name?: unknown } | undefined)?.name;
  return typeof name === 'string' ? name : undefined;
}

/** Options of an import. */
export interface ImportOpts {
  /** How the source is named in errors (`FILE`, `source`…). */
  sourceField?: string;
  /** How the name is named in errors. */
  nameField?: string;
  /** Hears lines the tools printed about a failure. */
  onOutput?: (line: string) => void;
}

/** Options of a build. */
export interface BuildOpts {
  /** How the arguments are named in errors (the CLI's NAME, --suite, --package-cache). */
  fields?: Partial<{ name: string; suite: string; packageCache: string; mirror: string }>;
  /** Hears every line mmdebstrap prints. */
  onOutput?: (line: string) => void;
  /** Interrupts the build. */
  signal?: AbortSignal;
}

/** The templates of one templates directory, with the sandboxes of one state directory as their users. */
export class LocalTemplates {
  constructor(
    private readonly settings: Pick<LocalSettings, 'templatesDir' | 'sandboxes' | 'keeperScript' | 'toolOverrides'>,
    private readonly registry: Pick<SandboxRegistry, 'inspectAll'>,
  ) {}

  /** The templates directory. */
  get dir(): string {
    return this.settings.templatesDir;
  }

  /** Every template, by name, with the live sandboxes on each. */
  async list(): Promise<TemplateDetails[]> {
    const users = await this.usersByTemplate();
    return listTemplates(this.dir).map((t) => ({ ...t, used_by: users.get(templateRef(t)) ?? [] }));
  }

  /** One template (by reference: `<owner>/<name>` for a user's); not_found when there is none. */
  async inspect(name: string): Promise<TemplateDetails> {
    const record = isStorableTemplateRef(name) ? readTemplate(this.dir, name) : undefined;
    if (!record) throw templateNotFound();
    return { ...record, used_by: (await this.usersByTemplate()).get(name) ?? [] };
  }

  /** Removes a template and the layers only it listed; conflict while a live sandbox runs on it. */
  async remove(name: string): Promise<void> {
    if (!isStorableTemplateRef(name)) throw templateNotFound();
    ensureTemplatesDir(this.dir);
    sweepStale(this.dir);
    await removeTemplate(this.dir, name, async (n) => ((await this.usersByTemplate()).get(n) ?? []).length > 0);
  }

  /** Imports a root filesystem from a tar archive or a directory as template `name`. */
  async importRoot(name: string, source: string, opts: ImportOpts = {}): Promise<TemplateRecord> {
    if (!isStorableTemplateName(name)) throw badTemplateName(opts.nameField ?? 'name');
    const kind = classifySource(source, opts.sourceField ?? 'source', this.dir);
    const owners = layerOwnersHere();
    const disk = openImage(source);
    if (disk) return this.makeFromImage(name, disk, { kind: 'image', from: kind.from, format: disk.image.format }, undefined);
    return this.make(name, [], async (claim) => {
      const layer = await makeLayer(this.dir, claim, owners, (root) =>
        fillFromSource(root, source, kind, owners, opts.onOutput ?? (() => {})),
      );
      return {
        format: 1,
        name,
        source: { kind: 'import', from: kind.from, format: kind.format },
        created_at: layer.created_at,
        size_bytes: layer.size_bytes,
        layers: [layer.id],
        owners,
      };
    });
  }

  /**
   * Makes template `name` of an image on disk, its config kept in the record (its Env, WorkingDir
   * and User hold for commands), with one store layer per image layer, each identified by its
   * chain id (and the owners): a layer the store has already (the same layer on the same layers
   * below, from any image) is listed, not made again. The template's record lists them top
   * first, as a snapshot's stack.
   */
  private async makeFromImage(
    name: string,
    disk: ImageOnDisk,
    source: TemplateSource,
    reference: string | undefined,
  ): Promise<TemplateRecord> {
    const owners = layerOwnersHere();
    const meta = this.copyMetaHelper();
    const chain = chainIds(disk.image.layers.map((l) => l.diffId));
    if (chain.length > MAX_TEMPLATE_LAYERS) throw imageTooManyLayers(chain.length, MAX_TEMPLATE_LAYERS);
    return this.make(name, [], async (claim) => {
      const copyMeta = new CopyMeta(meta);
      const stack: (StackLayer & { record: LayerRecord })[] = []; // top first
      try {
        for (const [index, chainId] of chain.entries()) {
          const id = imageLayerId(chainId, owners);
          const lowers = [...stack];
          const { record } = await makeSharedLayer(this.dir, claim, id, owners, { chain_id: chainId }, (root) =>
            applyImageLayer(root, disk, index, lowers, copyMeta, owners),
          );
          stack.unshift({ root: layerRoot(this.dir, id), opaque: new Set(record.image?.opaque_dirs ?? []), record });
        }
      } finally {
        copyMeta.close();
      }
      if (stack.length === 0) throw notARoot();
      const view = new StackView(stack);
      const shell = view.resolve(['bin', 'sh'], true);
      if (!shell?.found.st.isFile()) throw notARoot();
      const userIds = resolveImageUser(
        { readEtc: (file) => view.readEtc('etc', file, MAX_ACCOUNTS_BYTES), isDir: (path) => view.isRealDir(path) },
        disk.image.info.config.user,
      );
      const layers = stack.map((l) => l.record.id);
      await awaitLayers(this.dir, layers);
      return {
        format: 1,
        name,
        source,
        created_at: new Date().toISOString(),
        size_bytes: stack.reduce((sum, l) => sum + l.record.size_bytes, 0),
        layers,
        owners,
        image: { ...definedFields({ reference }), ...disk.image.info, user_ids: userIds },
      };
    });
  }

  /**
   * Pulls `reference` from its registry (registry-pull.ts, with skopeo) into the store's shared
   * blob cache and makes template `name` of it. Blobs already cached are not fetched again.
   */
  async pullImage(name: string, reference: string, opts: PullOpts = {}): Promise<TemplateRecord> {
    if (!isStorableTemplateName(name)) throw badTemplateName(opts.nameField ?? 'name');
    const ref = parseImageReference(reference, opts.referenceField ?? 'reference');
    ensureTemplatesDir(this.dir);
    const pulled = await pullToLayout(ref, this.dir, opts);
    try {
      const disk = openImage(pulled.layout, pulled.blobsDir);
      if (!disk) throw new ProviderError('internal', { code: 'pull_layout_missing' });
      return await this.makeFromImage(name, disk, { kind: 'image', from: ref.canonical, format: 'registry' }, ref.canonical);
    } finally {
      pulled.remove();
    }
  }

  /**
   * Builds a Debian template with mmdebstrap (debian-build.ts), passing each line it prints to
   * `onOutput`; `signal` interrupts it. Nothing remains of a failed or interrupted build.
   */
  async buildDebian(name: string, spec: DebianBuildSpec, opts: BuildOpts = {}): Promise<TemplateRecord> {
    const fields = { name: 'name', suite: 'suite', packageCache: 'package_cache', mirror: 'mirror', ...opts.fields };
    if (!isStorableTemplateName(name)) throw badTemplateName(fields.name);
    checkBuildSpec(spec, fields);
    if (process.geteuid?.() !== 0) throw buildNeedsRoot();
    const mmdebstrap = findExecutable('mmdebstrap');
    if (!mmdebstrap) throw mmdebstrapMissing();
    const unshare = findExecutable('unshare');
    if (!unshare)
      throw new ProviderError('unavailable', {
        code: 'unshare_missing',
        detail: "util-linux's unshare is not installed: install util-linux and retry.",
      });
    return this.make(name, [], async (claim) => {
      const layer = await makeLayer(this.dir, claim, 'native', (root) =>
        runMmdebstrap(spec, root, { mmdebstrap, unshare }, opts.onOutput ?? (() => {}), opts.signal),
      );
      return {
        format: 1,
        name,
        source: { kind: 'debian', suite: spec.suite, packages: spec.packages, variant: DEBIAN_VARIANT },
        created_at: layer.created_at,
        size_bytes: layer.size_bytes,
        layers: [layer.id],
        owners: 'native',
        env: { ...DEBIAN_TEMPLATE_ENV },
      };
    });
  }

  /**
   * Saves the writable layer of a running template sandbox as template `name`, on top of the
   * layers it runs on (snapshot.ts): `owner`'s own (`<owner>/<name>`) when given, else shared.
   * Refused (unsupported) for a base sandbox, (insufficient_resources) when snapshot storage
   * would pass `capBytes`, and (conflict) for a user's name a shared template has: that user's
   * plain name would otherwise stop meaning the shared one.
   */
  async snapshot(
    sandbox: { id: string; template: string | undefined; layerDirs: readonly string[] | undefined },
    layer: WritableLayerView | null,
    name: string,
    capBytes: number,
    owner?: string,
    rules: SnapshotRules = { keepAptCache: false },
  ): Promise<{ record: TemplateRecord; layerBytes: number; isFrozen: boolean }> {
    if (!isStorableTemplateName(name)) throw badTemplateName('name');
    if (owner !== undefined && readTemplate(this.dir, name)) throw sharedTemplateNameTaken();
    if (sandbox.template === undefined || sandbox.layerDirs === undefined || layer === null) throw snapshotNeedsTemplate();
    // The layers it runs on (their ids), as its spec recorded them: a live sandbox's template cannot be removed.
    const baseLayers = sandbox.layerDirs.map((d) => basename(dirname(d)));
    const baseRecords = baseLayers.map((id) => readLayer(this.dir, id));
    if (baseRecords.some((r) => r === undefined)) throw new ProviderError('internal', { code: 'template_layer_missing' });
    if (baseLayers.length + 1 > MAX_TEMPLATE_LAYERS) throw snapshotChainTooLong();
    const helper = this.copyMetaHelper();
    assertSnapshotFits(this.dir, snapshotSizeBytes(layer, rules), capBytes);
    // A snapshot runs its commands as its template did (a Debian build's DEBIAN_FRONTEND).
    const env = readTemplate(this.dir, sandbox.template)?.env;
    const owners = baseRecords[0]!.owners;
    let isFrozen = false;
    let layerBytes = 0;
    const record = await this.make(templateRef({ name, owner }), baseLayers, async (claim) => {
      const top = await makeLayer(this.dir, claim, owners, async (root) => {
        // Files may grow past the first look: the copy is charged as it goes, and stops past the cap.
        const used = snapshotStorageBytes(this.dir);
        const budget = { left: capBytes - used, overCap: () => snapshotGrewPastCap(used, capBytes) };
        isFrozen = (await fillFromWritableLayer(root, layer, { helper, budget, rules })).isFrozen;
      });
      layerBytes = top.size_bytes;
      return {
        format: 1,
        name,
        ...definedFields({ owner }),
        source: { kind: 'snapshot', sandbox_id: sandbox.id, parent: sandbox.template! },
        created_at: top.created_at,
        size_bytes: top.size_bytes + baseRecords.reduce((sum, r) => sum + r!.size_bytes, 0),
        layers: [top.id, ...baseLayers],
        owners,
        ...(env ? { env } : {}),
        // An image's config holds for what is made of it.
        ...definedFields({ image: readTemplate(this.dir, sandbox.template!)?.image }),
      };
    });
    return { record, layerBytes, isFrozen };
  }

  /** How a snapshot's copy runs helpers/copy-meta.pl (extended attributes, whiteouts). */
  private copyMetaHelper(): CopyMetaHelper {
    if (!isHelperArch(process.arch))
      throw new ProviderError('unsupported', { code: 'arch_unsupported', detail: LOCAL_DETAILS.archUnsupported });
    const perl = locateTool('perl', this.settings.toolOverrides);
    if (!perl) throw new ProviderError('unavailable', { code: 'perl_missing', detail: LOCAL_DETAILS.perlMissing });
    let text: string;
    try {
      text = readHelper(helpersDir(this.settings.keeperScript), 'copy-meta');
    } catch {
      throw new ProviderError('unavailable', { code: 'host_bundle_missing', detail: LOCAL_DETAILS.hostBundleMissing });
    }
    return { perl, text, arch: process.arch };
  }

  /**
   * Makes template `name` (a reference) on top of `baseLayers`: claims the name, lets `build` make its layer and
   * record, publishes the record. Nothing remains of a failure.
   */
  private async make(
    name: string,
    baseLayers: readonly string[],
    build: (claim: ReturnType<typeof claimName>) => Promise<TemplateRecord>,
  ): Promise<TemplateRecord> {
    ensureTemplatesDir(this.dir);
    sweepStale(this.dir);
    const claim = claimName(this.dir, name, baseLayers);
    try {
      const record = await build(claim);
      publishTemplate(this.dir, claim, record);
      return record;
    } catch (e) {
      // Layers it made and renamed into place (an image's, shared by id) that nothing else lists go with it.
      claim.release();
      try {
        removeUnlistedLayers(this.dir);
      } catch {
        // Left for the next sweep: the failure to report is the one above.
      }
      throw e;
    } finally {
      claim.release();
    }
  }

  /**
   * The live sandboxes (and creates in progress) by the template they run on. Dead ones are
   * cleaned up first (the registry's sweep), so only a sandbox that may still run counts.
   */
  private async usersByTemplate(): Promise<Map<string, string[]>> {
    await this.registry.inspectAll();
    const users = new Map<string, string[]>();
    for (const id of listSandboxIds(this.settings.sandboxes)) {
      const spec = readSpec(join(this.settings.sandboxes, id));
      const name = spec ? specTemplateName(spec) : undefined;
      if (name !== undefined) users.set(name, [...(users.get(name) ?? []), id]);
    }
    return users;
  }
}
