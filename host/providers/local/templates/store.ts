// Where local templates live and what a template is on disk: the contract between the code that
// makes templates (build, import, snapshot, remove) and the code that runs sandboxes on them.
//
//   <templates dir>/                 0700, the server's user's alone (layers hold setuid files)
//     <name>.json                    a shared template's record (TemplateRecordSchema), written atomically
//     <owner>@<name>.json            the record of a template a user made (snapshot_sandbox): theirs alone
//     layers/<layer id>/layer.json   the layer's record (LayerRecordSchema)
//     layers/<layer id>/root/        the layer's files; never changed once its record exists
//     layers/.tmp-*/                 layers being made; removed by whoever finds them stale
//
// A template is an ordered stack of layers, top first (an overlay's lowerdir order): a built or
// imported root filesystem has one; an image pulled or imported on a root server has one per image
// layer, each named by its chain id, so templates with the same layers share them; a snapshot
// adds the sandbox's changes as a new layer on top of the layers of the template the sandbox ran
// on, which several templates may then share. A layer is
// removed with the last template that lists it. `base` is not stored: it is the host's own system
// directories.
//
// Templates belong to a principal: one made by the operator or an admin (the CLI, an admin's
// snapshot_sandbox) is shared; one made by a `user` records that user as `owner` and is named by
// its reference `<owner>/<name>`, so alice's `py-dev` and bob's are two templates, and neither is
// the shared `py-dev` (docs/principals.md says who may see and use which).
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as z from 'zod';
import { PRINCIPAL_NAME_PATTERN } from '../../provider.js';
import { BASE_TEMPLATE } from './base-template.js';

/** Template names: lowercase letters, digits, `.`, `_` and `-`, starting with a letter or digit, at most 63 characters. */
export const TEMPLATE_NAME_PATTERN = /^[a-z0-9][a-z0-9._-]{0,62}$/;

/** True for a name a stored template may have (any valid name but `base`). */
export function isStorableTemplateName(name: string): boolean {
  return TEMPLATE_NAME_PATTERN.test(name) && name !== BASE_TEMPLATE && !name.endsWith('.json');
}

/** A template's reference: its name for a shared one, `<owner>/<name>` for a user's own. */
export function templateRef(record: Pick<TemplateRecord, 'name' | 'owner'>): string {
  return record.owner === undefined ? record.name : `${record.owner}/${record.name}`;
}

/** The name and owner a reference names, or undefined when it is no stored template's reference. */
export function parseTemplateRef(ref: string): { name: string; owner?: string } | undefined {
  const slash = ref.indexOf('/');
  if (slash < 0) return isStorableTemplateName(ref) ? { name: ref } : undefined;
  const owner = ref.slice(0, slash);
  const name = ref.slice(slash + 1);
  return PRINCIPAL_NAME_PATTERN.test(owner) && isStorableTemplateName(name) ? { name, owner } : undefined;
}

/** True for a reference a stored template may have. */
export function isStorableTemplateRef(ref: string): boolean {
  return parseTemplateRef(ref) !== undefined;
}

/** The base name of the files of template `ref` (its record, its claim): `@` is in neither a name nor an owner. */
export function templateFileStem(ref: string): string {
  return ref.replace('/', '@');
}

/**
 * The template `requested` means to `user` (undefined: the operator or an admin), or undefined
 * when it names none they may use. A user's plain name is their own template of that name when
 * they have one, else the shared one; `<owner>/<name>` is for its owner (and the operator and
 * admins) only. A plain name never means another user's template, to anyone.
 */
export function resolveTemplateRef(dir: string, requested: string, user: string | undefined): string | undefined {
  const parsed = parseTemplateRef(requested);
  if (!parsed) return undefined;
  if (parsed.owner !== undefined) return user === undefined || parsed.owner === user ? requested : undefined;
  if (user !== undefined && readTemplate(dir, templateRef({ name: parsed.name, owner: user }))) {
    return templateRef({ name: parsed.name, owner: user });
  }
  return requested;
}

/** True when `user` (undefined: the operator or an admin) may see and use `record`. */
export function mayUseTemplate(record: Pick<TemplateRecord, 'owner'>, user: string | undefined): boolean {
  return user === undefined || record.owner === undefined || record.owner === user;
}

/** Layer ids: 16 lowercase hex characters. */
export const LAYER_ID_PATTERN = /^[0-9a-f]{16}$/;

/**
 * Whose ids a layer's files carry. `native`: as made (root, `_apt`, `man`…), for a root server
 * that maps each sandbox's ids onto them with an idmapped mount. `flattened`: every file owned by
 * the server's own uid and gid, for a server that is not root (its sandboxes map that one id to
 * root inside).
 */
export const LAYER_OWNERS = ['native', 'flattened'] as const;
export type LayerOwners = (typeof LAYER_OWNERS)[number];

/** What an image's config says about running it (the OCI config's `config`), as a template keeps it. */
export const ImageRunConfigSchema = z.object({
  env: z.array(z.string()),
  working_dir: z.string(),
  user: z.string(),
  entrypoint: z.array(z.string()).nullable(),
  cmd: z.array(z.string()).nullable(),
});
export type ImageRunConfig = z.infer<typeof ImageRunConfigSchema>;

/** An image template's origin and config (TemplateRecord.image). */
export const ImageInfoSchema = z.object({
  /** The registry reference it was pulled by (absent for an import from disk). */
  reference: z.string().optional(),
  /** The manifest's digest (docker-archive: the config's, which names the image there). */
  digest: z.string(),
  /** `linux/amd64`… */
  platform: z.string(),
  config: ImageRunConfigSchema,
  /**
   * The ids `config.user` names in the image's own /etc/passwd and /etc/group (root for none),
   * read at pull or import, with its name and home (images/image-user.ts); null when it names no
   * user the root has. Its sandboxes run as it on a root server (imageUserPlan).
   */
  user_ids: z
    .object({
      uid: z.number().int(),
      gid: z.number().int(),
      name: z.string().optional(),
      home: z.string().optional(),
      home_is_dir: z.boolean().optional(),
    })
    .nullable()
    .optional(),
  /** Its layers' digests, bottom first. */
  layers: z.array(z.string()),
});
export type ImageInfo = z.infer<typeof ImageInfoSchema>;

/** Where a template came from. */
export const TemplateSourceSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('debian'), suite: z.string(), packages: z.array(z.string()), variant: z.string() }),
  /** `from` is the imported file's or directory's base name only: a full host path says more than it needs to. */
  z.object({ kind: z.literal('import'), from: z.string(), format: z.enum(['tar', 'directory']) }),
  z.object({ kind: z.literal('snapshot'), sandbox_id: z.string(), parent: z.string() }),
  /** A container image: pulled from a registry (`from` is the reference) or imported from disk (`from` the base name). */
  z.object({ kind: z.literal('image'), from: z.string(), format: z.enum(['registry', 'docker-archive', 'oci-layout']) }),
]);
export type TemplateSource = z.infer<typeof TemplateSourceSchema>;

/** `<name>.json`. */
export const TemplateRecordSchema = z.object({
  format: z.literal(1),
  name: z.string().regex(TEMPLATE_NAME_PATTERN),
  /** The user whose template it is (made by their snapshot_sandbox); absent: shared. */
  owner: z.string().regex(PRINCIPAL_NAME_PATTERN).optional(),
  source: TemplateSourceSchema,
  /** ISO 8601. */
  created_at: z.string(),
  /** Bytes of all its layers' files (shared layers counted in full). */
  size_bytes: z.number().int().nonnegative(),
  /** Top first; at least one. */
  layers: z.array(z.string().regex(LAYER_ID_PATTERN)).min(1),
  owners: z.enum(LAYER_OWNERS),
  /**
   * Variables every command and task of a sandbox on it gets, beneath create_sandbox's `envs`:
   * a Debian build's DEBIAN_FRONTEND, kept by its snapshots. Absent: none (older records too).
   */
  env: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/), z.string()).optional(),
  /** An image template's origin and config (its Env, WorkingDir and User hold for commands); absent for others. */
  image: ImageInfoSchema.optional(),
});
export type TemplateRecord = z.infer<typeof TemplateRecordSchema>;

/** `layers/<id>/layer.json`. */
export const LayerRecordSchema = z.object({
  format: z.literal(1),
  id: z.string().regex(LAYER_ID_PATTERN),
  created_at: z.string(),
  size_bytes: z.number().int().nonnegative(),
  owners: z.enum(LAYER_OWNERS),
  /**
   * An image layer's identity (absent for other layers): its OCI chain id (the digests of its
   * uncompressed tar and of every layer under it), which its id is derived from, so that every
   * template with the same layer on the same layers below lists this one; and the directories it
   * marks opaque (relative paths), which the layers made on top of it read without xattrs.
   */
  image: z.object({ chain_id: z.string(), opaque_dirs: z.array(z.string()) }).optional(),
});
export type LayerRecord = z.infer<typeof LayerRecordSchema>;

/** `$SANDBOX_MCP_TEMPLATE_DIR` when set (the configuration passes it), else `templates` in the state directory. */
export function templatesDir(stateDir: string, override?: string): string {
  return override ?? join(stateDir, 'templates');
}

/** The directory holding layer `id`'s files (its `root/`). */
export function layerRoot(dir: string, id: string): string {
  return join(dir, 'layers', id, 'root');
}

/** The record of template `ref`, or undefined when there is none (or it cannot be read as one). */
export function readTemplate(dir: string, ref: string): TemplateRecord | undefined {
  const parsed = parseTemplateRef(ref);
  if (!parsed) return undefined;
  let text: string;
  try {
    text = readFileSync(join(dir, `${templateFileStem(ref)}.json`), 'utf8');
  } catch {
    return undefined;
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return undefined;
  }
  const record = TemplateRecordSchema.safeParse(json);
  return record.success && record.data.name === parsed.name && record.data.owner === parsed.owner ? record.data : undefined;
}

/** Every stored template, by reference. */
export function listTemplates(dir: string): TemplateRecord[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  return names
    .filter((f) => f.endsWith('.json'))
    .map((f) => readTemplate(dir, f.slice(0, -'.json'.length).replace('@', '/')))
    .filter((t): t is TemplateRecord => t !== undefined)
    .sort((a, b) => templateRef(a).localeCompare(templateRef(b)));
}

/** The layers' file trees of a template, top first: an overlay's lowerdir list. */
export function templateLowerDirs(dir: string, record: TemplateRecord): string[] {
  return record.layers.map((id) => layerRoot(dir, id));
}
