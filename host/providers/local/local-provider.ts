// The local provider: bubblewrap sandboxes on this machine, each kept by a detached keeper
// process that owns its deadline (keeper.ts). This file only composes the parts — lifecycle
// (create-sandbox.ts, lifecycle.ts), commands (commands.ts), files (file-ops.ts) and interactive
// terminals (terminal.ts) over one registry of live sandboxes (sandbox-registry.ts) — and is the
// boundary where every failure leaves as a ProviderError.
import type {
  CreateOpts,
  ExecOpts,
  ExecResult,
  FileEntry,
  ListFilesOpts,
  ListOpts,
  Provider,
  ReadFileOpts,
  ReadFileResult,
  SandboxMetadata,
  TerminalOpts,
  TerminalSession,
  WriteFileOpts,
} from '../provider.js';
import { CommandRunner } from './command-runner.js';
import { SandboxCommands } from './commands.js';
import { SandboxCreator } from './create-sandbox.js';
import { toProviderError } from './errors.js';
import { SandboxFiles } from './file-ops.js';
import { SandboxLifecycle } from './lifecycle.js';
import { SandboxRegistry } from './sandbox-registry.js';
import { resolveSettings, type LocalProviderOpts } from './settings.js';
import { SandboxTerminals } from './terminal.js';

export { MIN_MEMORY_MB } from './create-sandbox.js';
export { defaultKeeperScript } from './keeper-start.js';
export { type LocalProviderOpts } from './settings.js';

/** Name of this provider (prefix of qualified ids). */
export const LOCAL_PROVIDER_ID = 'local';

/** Awaits `run` and rethrows whatever it throws as a ProviderError (never a foreign message). */
async function asProviderErrors<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (e) {
    throw toProviderError(e);
  }
}

/** The local provider (see the module comment). Use createLocalProvider. */
export class LocalProvider implements Provider {
  readonly id = LOCAL_PROVIDER_ID;
  private readonly registry: SandboxRegistry;
  private readonly creator: SandboxCreator;
  private readonly lifecycle: SandboxLifecycle;
  private readonly commands: SandboxCommands;
  private readonly files: SandboxFiles;
  private readonly terminals: SandboxTerminals;

  constructor(opts: LocalProviderOpts = {}) {
    const settings = resolveSettings(opts);
    const runner = new CommandRunner(settings);
    this.registry = new SandboxRegistry(settings);
    this.creator = new SandboxCreator(settings, this.registry);
    this.lifecycle = new SandboxLifecycle(settings, this.registry, runner);
    this.commands = new SandboxCommands(settings, this.registry, runner);
    this.files = new SandboxFiles(settings, this.registry, runner);
    this.terminals = new SandboxTerminals(settings, this.registry, runner);
  }

  async create(opts: CreateOpts): Promise<SandboxMetadata> {
    return asProviderErrors(() => this.creator.create(opts));
  }

  async list(opts: ListOpts): Promise<SandboxMetadata[]> {
    return asProviderErrors(() => this.lifecycle.list(opts));
  }

  async getInfo(sandboxId: string): Promise<SandboxMetadata> {
    return asProviderErrors(() => this.lifecycle.getInfo(sandboxId));
  }

  async setTimeout(sandboxId: string, timeoutS: number): Promise<void> {
    return asProviderErrors(() => this.lifecycle.setTimeout(sandboxId, timeoutS));
  }

  async kill(sandboxId: string): Promise<void> {
    return asProviderErrors(() => this.lifecycle.kill(sandboxId));
  }

  async close(): Promise<void> {
    this.registry.clear();
  }

  async exec(sandboxId: string, command: string, opts: ExecOpts): Promise<ExecResult> {
    return asProviderErrors(() => this.commands.exec(sandboxId, command, opts));
  }

  async readFile(sandboxId: string, path: string, opts: ReadFileOpts = {}): Promise<ReadFileResult> {
    return asProviderErrors(() => this.files.readFile(sandboxId, path, opts));
  }

  async writeFile(sandboxId: string, path: string, data: Buffer, opts: WriteFileOpts = {}): Promise<{ size: number }> {
    return asProviderErrors(() => this.files.writeFile(sandboxId, path, data, opts));
  }

  async listFiles(sandboxId: string, path: string, opts: ListFilesOpts): Promise<FileEntry[]> {
    return asProviderErrors(() => this.files.listFiles(sandboxId, path, opts));
  }

  async openTerminal(sandboxId: string, opts: TerminalOpts): Promise<TerminalSession> {
    return asProviderErrors(() => this.terminals.open(sandboxId, opts));
  }
}

/** Creates the local provider (bubblewrap sandboxes on this machine). */
export function createLocalProvider(opts?: LocalProviderOpts): Provider {
  return new LocalProvider(opts);
}
