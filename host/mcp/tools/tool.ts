// What a tool is, and the helpers every tool group shares: sandbox resolution and renewal
// (metadata qualification is in providers/sandbox-metadata.ts, which the CLI shares). Tool
// handlers throw ProviderError; tool-call.ts turns it into an `isError` result. They never format
// provider errors themselves.
import * as z from 'zod';
import { envsBytes, LIMITS } from '../../../shared/limits.js';
import type { ServerConfig } from '../../config/config.js';
import { ProviderError } from '../../providers/provider-error.js';
import { parseSandboxRef, type SandboxRef } from '../../providers/sandbox-ref.js';
import type { ServerDeps } from '../server-deps.js';
import type { Session } from '../session.js';

/** Sends one notifications/progress for the current call; never throws (a failed send is dropped). */
export type ProgressNotifier = (progress: number, message: string) => Promise<void>;

export interface ToolContext {
  deps: ServerDeps;
  session: Session;
  /** Aborted when the client cancels the call (notifications/cancelled) or the connection closes. */
  signal?: AbortSignal;
  /** Present when the client asked for progress (sent a progress token); see withProgress. */
  progress?: ProgressNotifier;
}

/** A content block beyond the JSON text (an image for download_file, a note for the reader). */
export type ExtraContent = { type: 'image'; data: string; mimeType: string } | { type: 'text'; text: string };

export interface ToolAnnotations {
  readOnlyHint: boolean;
  destructiveHint: boolean;
  idempotentHint: boolean;
  openWorldHint: boolean;
}

/** One tool: strict schemas, honest annotations and a handler. */
export interface ToolDef<I extends z.ZodType = z.ZodType, O extends z.ZodType = z.ZodType> {
  name: string;
  title: string;
  description: string;
  input: I;
  output: O;
  annotations: ToolAnnotations;
  /** Appended to the description in tools/list: what this server's configuration makes true (e.g. the network). */
  configNote?(config: ServerConfig): string;
  /** Appended after that, read at every tools/list: what may change while the server runs (e.g. its templates). */
  listNote?(deps: ServerDeps): string;
  run(args: z.infer<I>, ctx: ToolContext): Promise<{ result: z.infer<O>; content?: ExtraContent[] }>;
}

/** Keeps a tool's input and output types tied together. */
export function defineTool<I extends z.ZodType, O extends z.ZodType>(def: ToolDef<I, O>): ToolDef<I, O> {
  return def;
}

/** An optional integer in [min, max]: JSON integers only (no booleans, floats or numeric strings). */
export const intIn = (min: number, max: number) => z.number().int().min(min).max(max);

/** An explicit sandbox id: never empty; `provider:id` or an id of the default provider. */
export const SandboxIdSchema = z.string().min(1).max(200);

/** The `sandbox_id` of a tool that falls back to the session default: described once for all of them. */
export const DefaultSandboxIdSchema = SandboxIdSchema.optional().describe(
  "The sandbox, as create_sandbox returned it (e.g. local:abc; an unqualified id is the default provider's). Default: this session's default sandbox (the last one it created).",
);

/**
 * Environment variables: POSIX names to string values, LIMITS.envsMaxBytes in all. Every
 * command of a sandbox carries them: beyond the kernel's bounds every exec fails with E2BIG.
 */
export const EnvsSchema = z
  .record(
    z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name')
      .max(256),
    z.string().max(32768),
  )
  .refine((envs) => envsBytes(envs) <= LIMITS.envsMaxBytes, { params: { maximum_bytes: LIMITS.envsMaxBytes } });

/** The explicit sandbox, or the session default; never creates one. */
export function resolveSandbox(ctx: ToolContext, sandboxId: string | undefined): SandboxRef {
  if (sandboxId !== undefined) return parseSandboxRef(sandboxId, ctx.deps.config.defaultProvider);
  const fallback = ctx.session.defaultSandbox;
  if (!fallback) {
    throw new ProviderError('invalid_argument', {
      code: 'no_default_sandbox',
      detail: 'No sandbox_id was given and this session has no default sandbox. Call create_sandbox first or pass sandbox_id.',
    });
  }
  return parseSandboxRef(fallback, ctx.deps.config.defaultProvider);
}

/**
 * How far short of a renewal's end a lifetime may already end and still be left as it is: a tenth
 * of the renewal, at most a minute. Calls in a burst then write the lifetime once, not each time:
 * locally a write is a deadline file replaced by rename (1–2 ms of the server's thread on ext4,
 * where the rename may wait on the disk) and two signals that wake the keeper; on E2B an API call.
 */
export function renewalSlackMs(renewS: number): number {
  return Math.min(renewS * 100, 60_000);
}

/**
 * Ordinary exec/file tools renew session-owned sandboxes to the session's renewal duration (within
 * renewalSlackMs). A renewal only ever lengthens: a lifetime already ending later (set by another
 * session's set_sandbox_timeout, or from the dashboard) stays; only set_sandbox_timeout shortens
 * one. A failed renewal does not fail the tool: the operation itself reports what matters.
 */
export async function renewIfOwned(ctx: ToolContext, ref: SandboxRef): Promise<void> {
  const renewS = ctx.session.renewalFor(ref.qualified);
  if (renewS === undefined) return;
  try {
    const provider = ctx.deps.providers.get(ref.provider);
    // Not getInfo: its liveness checks (two /proc reads locally) are setTimeout's to make.
    const endAt = provider.lifetimeEnd ? await provider.lifetimeEnd(ref.id) : (await provider.getInfo(ref.id)).end_at;
    if (endAt !== null && Date.parse(endAt) >= Date.now() + renewS * 1000 - renewalSlackMs(renewS)) return;
    await provider.setTimeout(ref.id, renewS);
  } catch (e) {
    ctx.deps.log.warn('renewal failed', { category: e instanceof ProviderError ? e.category : 'internal' });
  }
}

/**
 * Before any output of `ref` is shown: the secrets its own record holds join its masking, once
 * per process (a server that did not create it learns them here). A failed read fails the call:
 * output is never shown unmasked for want of the values.
 */
export async function learnSecrets(ctx: ToolContext, ref: SandboxRef): Promise<void> {
  await ctx.deps.masker.learn(ref.qualified, () => ctx.deps.providers.get(ref.provider).getEnvironment(ref.id));
}
