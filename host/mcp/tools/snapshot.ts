// snapshot_sandbox: a sandbox's current files saved as a new template create_sandbox can start
// from, while the sandbox runs on. The provider does the work (local: a layer of the sandbox's
// writable root; e2b: E2B's snapshot API) and says in `note` what a sandbox started from it has
// and has not; a provider without snapshots answers unsupported.
import * as z from 'zod';
import { noSnapshots } from '../../providers/provider.js';
import { TEMPLATE_NAME_PATTERN } from '../../providers/local/templates/store.js';
import { DefaultSandboxIdSchema, defineTool, resolveSandbox } from './tool.js';

/** snapshot_sandbox's result. */
export const SnapshotResultSchema = z.strictObject({
  sandbox_id: z.string(),
  template: z.string(),
  size_bytes: z.number().int().nonnegative().nullable(),
  created_at: z.string(),
  note: z.string(),
});

const snapshotSandbox = defineTool({
  name: 'snapshot_sandbox',
  title: 'Snapshot sandbox',
  description:
    "Save a sandbox's current files (the session default when sandbox_id is omitted) as a new template `name`; the sandbox keeps running. " +
    "create_sandbox with the result's `template` starts a sandbox with those files. Processes and tasks are not carried over (the result's " +
    'note says what is). Local: only a sandbox created from a template (not base); the server caps how much snapshot storage it keeps. ' +
    "With a tokens file, a user's snapshot is theirs alone (local: `template` is USER/NAME; a shared template's name is refused), an admin's is shared.",
  input: z.strictObject({
    sandbox_id: DefaultSandboxIdSchema,
    name: z
      .string()
      .regex(TEMPLATE_NAME_PATTERN, "lowercase letters, digits, '.', '_' and '-', starting with a letter or digit, at most 63 characters")
      .describe("The new template's name."),
    keep_apt_cache: z
      .boolean()
      .optional()
      .describe(
        "Local: keep apt's downloaded package lists and .deb archives (var/lib/apt/lists, var/cache/apt/archives), which a snapshot leaves out by default. E2B keeps every file either way.",
      ),
  }),
  output: SnapshotResultSchema,
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
  async run(args, ctx) {
    const ref = resolveSandbox(ctx, args.sandbox_id);
    const provider = ctx.deps.providers.get(ref.provider);
    if (!provider.snapshot) throw noSnapshots();
    const made = await provider.snapshot(ref.id, args.name, { keepAptCache: args.keep_apt_cache === true });
    return {
      result: {
        sandbox_id: ref.qualified,
        template: made.template,
        size_bytes: made.sizeBytes,
        created_at: made.createdAt,
        note: made.note,
      },
    };
  },
});

/** The snapshot tool. */
export const snapshotTools = [snapshotSandbox];
