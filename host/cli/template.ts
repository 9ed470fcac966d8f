// `sandbox-mcp template build|import|ls|inspect|rm`: the person's side of local templates (the
// root filesystems create_sandbox's `template` names). args.ts parses the command line; this
// module checks each subcommand's arguments (naming what is wrong, never echoing a value), runs
// it on the configuration's templates directory and returns the exit status. Progress and
// complaints go to stderr; stdout carries the result (JSON with --json, and always for inspect).
import * as z from 'zod';
import { localProviderOpts } from '../config/local-options.js';
import type { ServerConfig } from '../config/config.js';
import { createLocalTemplates, type TemplateDetails } from '../providers/local/local-provider.js';
import { DEFAULT_DEBIAN_SUITE, parsePackageList } from '../providers/local/templates/debian-build.js';
import { imageUserPlan } from '../providers/local/templates/images/image-user.js';
import { TEMPLATE_NAME_RULE } from '../providers/local/templates/refusals.js';
import {
  isStorableTemplateName,
  isStorableTemplateRef,
  templateRef,
  TemplateRecordSchema,
  type TemplateRecord,
  type TemplateSource,
} from '../providers/local/templates/store.js';
import { qualify } from '../providers/sandbox-ref.js';
import { isProviderError } from '../providers/provider-error.js';
import { definedFields } from '../util/defined-fields.js';
import { UsageError, type CommandLine } from './args.js';
import { BuildProgress } from './build-progress.js';
import { formatBytes, formatRelative, isColourWanted, renderTable } from './format.js';

/** The template subcommands. */
export const TEMPLATE_SUBCOMMANDS = ['build', 'import', 'pull', 'ls', 'inspect', 'rm'] as const;
type Subcommand = (typeof TEMPLATE_SUBCOMMANDS)[number];

/** One template as `template ls --json` and `template inspect` print it: its record and the live sandboxes on it (qualified ids). */
export const TemplateEntrySchema = TemplateRecordSchema.extend({
  used_by: z.array(z.string()),
  /** Why the image's `User` is not honoured here (its sandboxes' commands run as root inside); absent when it is, or there is none. */
  user_note: z.string().optional(),
});
export type TemplateEntry = z.infer<typeof TemplateEntrySchema>;

/** What `template ls --json` prints. */
export const TemplateListingSchema = z.strictObject({ templates: z.array(TemplateEntrySchema) });
export type TemplateListing = z.infer<typeof TemplateListingSchema>;

/** Exit status of a build stopped with Ctrl-C (shell convention, 128+SIGINT). */
export const INTERRUPTED_EXIT = 130;

const USAGE: Record<Subcommand, { args: number; usage: string; flags: readonly (keyof CommandLine)[] }> = {
  build: {
    args: 1,
    usage: 'sandbox-mcp template build NAME [--packages LIST] [--suite S] [--mirror URL] [--package-cache DIR]',
    flags: ['packages', 'suite', 'mirror', 'packageCache'],
  },
  import: { args: 2, usage: 'sandbox-mcp template import NAME FILE.tar|DIR', flags: [] },
  pull: {
    args: 2,
    usage: 'sandbox-mcp template pull NAME REFERENCE [--username U --password-stdin] [--insecure]',
    flags: ['username', 'passwordStdin', 'insecure'],
  },
  ls: { args: 0, usage: 'sandbox-mcp template ls [--json]', flags: ['json'] },
  inspect: { args: 1, usage: 'sandbox-mcp template inspect NAME|OWNER/NAME', flags: [] },
  rm: { args: 1, usage: 'sandbox-mcp template rm NAME|OWNER/NAME', flags: [] },
};

const FLAG_NAMES: Partial<Record<keyof CommandLine, string>> = {
  packages: '--packages',
  suite: '--suite',
  packageCache: '--package-cache',
  mirror: '--mirror',
  json: '--json',
  username: '--username',
  passwordStdin: '--password-stdin',
  insecure: '--insecure',
};

/** The subcommand and its arguments, checked: a UsageError names what is wrong. */
function parseSubcommand(line: CommandLine): { sub: Subcommand; args: string[] } {
  const [sub, ...args] = line.args;
  if (!(TEMPLATE_SUBCOMMANDS as readonly string[]).includes(sub ?? '')) {
    throw new UsageError(`template needs a subcommand: ${TEMPLATE_SUBCOMMANDS.join(', ')} (see sandbox-mcp --help)`);
  }
  const spec = USAGE[sub as Subcommand];
  if (args.length !== spec.args) throw new UsageError(`usage: ${spec.usage}`);
  for (const [key, flag] of Object.entries(FLAG_NAMES) as [keyof CommandLine, string][]) {
    const value = line[key];
    if (value !== undefined && value !== false && !spec.flags.includes(key)) {
      throw new UsageError(
        `${flag} applies only to: ${TEMPLATE_SUBCOMMANDS.filter((s) => USAGE[s].flags.includes(key))
          .map((s) => `sandbox-mcp template ${s}`)
          .join(', ')}`,
      );
    }
  }
  // inspect and rm also take a user's template by its reference, OWNER/NAME.
  const isName = sub === 'inspect' || sub === 'rm' ? isStorableTemplateRef : isStorableTemplateName;
  if (sub !== 'ls' && !isName(args[0]!)) throw new UsageError(`NAME must be ${TEMPLATE_NAME_RULE}`);
  return { sub: sub as Subcommand, args };
}

/** How a template's source reads in `template ls`. */
export function describeSource(source: TemplateSource): string {
  switch (source.kind) {
    case 'debian':
      return `debian ${source.suite}${source.packages.length > 0 ? ` + ${source.packages.join(',')}` : ''}`;
    case 'import':
      return `import of ${source.from}`;
    case 'snapshot':
      return `snapshot of ${source.parent}`;
    case 'image':
      return source.format === 'registry' ? `image ${source.from}` : `image ${source.from} (${source.format})`;
  }
}

function entry(details: TemplateDetails): TemplateEntry {
  return {
    ...details,
    used_by: details.used_by.map((id) => qualify('local', id).qualified),
    ...definedFields({ user_note: userNote(details) }),
  };
}

/** Why `record`'s image `User` is not honoured in its sandboxes (templates/images/image-user.ts imageUserPlan); undefined when it is. */
function userNote(record: TemplateRecord): string | undefined {
  const plan = imageUserPlan(record.image, record.owners);
  return plan && 'note' in plan ? plan.note : undefined;
}

/** The made line, and on a line of its own the note on the image's `User` when it is not honoured. */
function madeLines(verb: string, record: TemplateRecord, elapsedMs?: number): string {
  const note = userNote(record);
  return madeLine(verb, record, elapsedMs) + (note ? `note: ${note}\n` : '');
}

/** `template ls` for people: one row per template; an OWNER column once a user has one (a tokens file's snapshot_sandbox). */
export function renderTemplates(entries: readonly TemplateEntry[], nowMs: number, colour: boolean): string {
  if (entries.length === 0) return 'no templates (sandbox-mcp template build or template import makes one)\n';
  const hasOwners = entries.some((t) => t.owner !== undefined);
  const rows = [
    [
      { text: 'NAME', colour: 'bold' as const },
      ...(hasOwners ? [{ text: 'OWNER', colour: 'bold' as const }] : []),
      { text: 'SOURCE', colour: 'bold' as const },
      { text: 'SIZE', colour: 'bold' as const },
      { text: 'CREATED', colour: 'bold' as const },
      { text: 'SANDBOXES', colour: 'bold' as const },
    ],
    ...entries.map((t) => [
      templateRef(t),
      ...(hasOwners ? [t.owner ?? 'shared'] : []),
      describeSource(t.source),
      formatBytes(t.size_bytes),
      formatRelative(Date.parse(t.created_at), nowMs),
      t.used_by.length > 0 ? t.used_by.join(',') : '-',
    ]),
  ];
  return renderTable(rows, { colour }).join('\n') + '\n';
}

function madeLine(verb: string, record: TemplateRecord, elapsedMs?: number): string {
  const took = elapsedMs === undefined ? '' : ` in ${Math.round(elapsedMs / 1000)} s`;
  return `${verb} template ${templateRef(record)}: ${describeSource(record.source)}, ${formatBytes(record.size_bytes)}${took}\n`;
}

/** Calls `run` with a signal that Ctrl-C (or TERM, HUP) aborts, for as long as it runs. */
async function interruptible<T>(run: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const interrupt = new AbortController();
  const onSignal = () => interrupt.abort();
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
  for (const s of signals) process.on(s, onSignal);
  try {
    return await run(interrupt.signal);
  } finally {
    for (const s of signals) process.off(s, onSignal);
  }
}

/** Runs one template subcommand (see --help) and returns its exit status; throws UsageError or ProviderError. */
export async function runTemplateCommand(line: CommandLine, config: ServerConfig): Promise<number> {
  const { sub, args } = parseSubcommand(line);
  const templates = createLocalTemplates(localProviderOpts(config));
  const out = (text: string) => void process.stdout.write(text);
  switch (sub) {
    case 'ls': {
      const entries = (await templates.list()).map(entry);
      out(
        line.json
          ? JSON.stringify({ templates: entries } satisfies TemplateListing, null, 2) + '\n'
          : renderTemplates(entries, Date.now(), isColourWanted(process.stdout, process.env)),
      );
      return 0;
    }
    case 'inspect':
      out(JSON.stringify(entry(await templates.inspect(args[0]!)), null, 2) + '\n');
      return 0;
    case 'rm':
      await templates.remove(args[0]!);
      out(`removed template ${args[0]}\n`);
      return 0;
    case 'import': {
      const record = await templates.importRoot(args[0]!, args[1]!, {
        nameField: 'NAME',
        sourceField: 'FILE.tar|DIR',
        onOutput: (l) => void process.stderr.write(`  ${l}\n`),
      });
      out(madeLines('imported', record));
      return 0;
    }
    case 'pull':
      return pull(templates, args[0]!, args[1]!, line, out);
    case 'build':
      return build(templates, args[0]!, line, out);
  }
}

async function build(
  templates: ReturnType<typeof createLocalTemplates>,
  name: string,
  line: CommandLine,
  out: (text: string) => void,
): Promise<number> {
  const spec = {
    suite: line.suite ?? DEFAULT_DEBIAN_SUITE,
    packages: parsePackageListOrUsage(line.packages),
    ...definedFields({ packageCache: line.packageCache, mirror: line.mirror }),
  };
  const progress = new BuildProgress(process.stderr, `building template ${name}`);
  let isSuccess = false;
  try {
    const record = await interruptible((signal) =>
      templates.buildDebian(name, spec, {
        fields: { name: 'NAME', suite: '--suite', packageCache: '--package-cache', mirror: '--mirror' },
        onOutput: (l) => progress.line(l),
        signal,
      }),
    );
    isSuccess = true;
    progress.finish(true);
    out(madeLine('built', record, progress.elapsedMs()));
    return 0;
  } catch (e) {
    if (!isSuccess) progress.finish(false);
    if (isProviderError(e) && e.code === 'build_interrupted') {
      process.stderr.write(`sandbox-mcp: ${e.suggestion}\n`);
      return INTERRUPTED_EXIT;
    }
    throw e;
  }
}

/** Reads the password from stdin (all of it, one trailing newline dropped). */
async function readPassword(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks)
    .toString('utf8')
    .replace(/\r?\n$/, '');
}

async function pull(
  templates: ReturnType<typeof createLocalTemplates>,
  name: string,
  reference: string,
  line: CommandLine,
  out: (text: string) => void,
): Promise<number> {
  if ((line.username !== undefined) !== line.passwordStdin) throw new UsageError('--username and --password-stdin go together');
  const credentials = line.username !== undefined ? { username: line.username, password: await readPassword() } : undefined;
  if (credentials && credentials.password === '') throw new UsageError('--password-stdin read an empty password');
  const isTerminal = process.stderr.isTTY === true;
  const started = Date.now();
  const record = await interruptible((signal) =>
    templates.pullImage(name, reference, {
      nameField: 'NAME',
      referenceField: 'REFERENCE',
      isInsecure: line.insecure,
      signal,
      ...(credentials ? { credentials } : {}),
      // On a terminal skopeo draws its progress bars there itself.
      ...(isTerminal ? { progressFd: 2 } : { onOutput: (l: string) => void process.stderr.write(`  ${l}\n`) }),
    }),
  );
  out(madeLines('pulled', record, Date.now() - started));
  return 0;
}

function parsePackageListOrUsage(text: string | undefined): string[] {
  try {
    return parsePackageList(text, '--packages');
  } catch (e) {
    throw new UsageError(isProviderError(e) ? e.suggestion.replace(/\.$/, '') : '--packages is not valid');
  }
}
