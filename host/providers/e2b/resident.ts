// The resident agent of an E2B sandbox: one long-lived background command per sandbox per server
// process (`node agent.cjs serve`), spoken to over its stdin (the SDK's sendStdin, one request
// frame per call, in order) and its stdout (the onStdout callback), started on first use through
// the sandbox's existing connection (no lifetime extension). The agent file is installed by the
// same command when missing: it asks for it (`need-agent` on stdout) and reads it from its stdin
// first. It ends at end of input (the provider closing), or by itself after IDLE_EXIT_S without a
// request (a server that died leaves envd holding its stdin). The SDK's command handle keeps every
// byte of stdout it ever received, so after RECYCLE_AFTER_BYTES a channel is retired: new requests
// get a new resident, and the old one is closed once its requests are answered.
import type { CommandHandle, Sandbox } from 'e2b';
import { lineSplitter } from '../../../shared/frame-lines.js';
import { AGENT_INSTALL_DIR, loadAgentBundle, type AgentBundle } from '../agent-bundle.js';
import { ResidentChannel, type LineTransport } from '../resident-channel.js';

/** How long a new resident may take to greet (its node start, envd's round trips, the install). */
const GREETING_TIMEOUT_MS = 20_000;
/** After a resident could not be started, how long calls run the old way before it is tried again. */
const RETRY_AFTER_MS = 10_000;
/**
 * The resident exits by itself after this long without a request while it runs nothing (a server
 * that died leaves envd holding its stdin). Longer than a local one's quiet period: starting it
 * again costs a command over the network and an install check, and its memory is E2B's VM's.
 */
const IDLE_EXIT_S = 600;
/** Answers read through one command handle before it is retired (the SDK keeps them all). */
const RECYCLE_AFTER_BYTES = 8 * 1024 * 1024;
/** The line the start script writes when the sandbox lacks this agent build. */
const NEED_AGENT = 'need-agent';
/** Node's flags for the resident: a small heap, one V8 worker thread. */
const NODE_FLAGS = '--max-old-space-size=32 --max-semi-space-size=1 --v8-pool-size=1';

interface Resident {
  channel: ResidentChannel;
  handle: CommandHandle;
  /** Bytes of answers read so far (see RECYCLE_AFTER_BYTES). */
  readBytes: number;
}

interface Slot {
  current: Resident | null;
  opening: Promise<Resident | null> | null;
  retryAtMs: number;
}

/** The residents of one e2b provider instance, by sandbox id. */
export class E2bResidents {
  private readonly slots = new Map<string, Slot>();
  private bundle: AgentBundle | null = null;

  constructor(private readonly loadBundle: () => AgentBundle = loadAgentBundle) {}

  /**
   * The sandbox's resident channel, or null when none can be had now (no node, say): calls then go
   * the old way. `isStartSkipped`: only one already open (none is started, none awaited).
   */
  async channel(sandbox: Sandbox, isStartSkipped = false): Promise<ResidentChannel | null> {
    const id = sandbox.sandboxId;
    if (isStartSkipped) {
      const open = this.slots.get(id)?.current?.channel;
      return open?.isOpen ? open : null;
    }
    let slot = this.slots.get(id);
    if (!slot) this.slots.set(id, (slot = { current: null, opening: null, retryAtMs: 0 }));
    const current = slot.current;
    if (current?.channel.isOpen && current.readBytes < RECYCLE_AFTER_BYTES) return current.channel;
    if (current?.channel.isOpen) retire(current);
    slot.current = null;
    if (!slot.opening) {
      if (Date.now() < slot.retryAtMs) return null;
      slot.opening = this.start(sandbox, slot);
    }
    return (await slot.opening)?.channel ?? null;
  }

  /** Ends the sandbox's resident (the sandbox is gone, or the provider closes). */
  forget(sandboxId: string): void {
    const slot = this.slots.get(sandboxId);
    this.slots.delete(sandboxId);
    if (slot?.current) end(slot.current);
  }

  /** Ends every resident of this instance. */
  closeAll(): void {
    for (const id of [...this.slots.keys()]) this.forget(id);
  }

  private async start(sandbox: Sandbox, slot: Slot): Promise<Resident | null> {
    try {
      const resident = await this.launch(sandbox);
      slot.current = resident;
      resident.channel.onClosed(() => {
        if (slot.current === resident) slot.current = null;
      });
      return resident;
    } catch {
      slot.retryAtMs = Date.now() + RETRY_AFTER_MS;
      return null;
    } finally {
      slot.opening = null;
    }
  }

  /** Starts `node agent.cjs serve` in the background and waits for its greeting. */
  private async launch(sandbox: Sandbox): Promise<Resident> {
    this.bundle ??= this.loadBundle();
    const bundle = this.bundle;
    const file = `"$HOME/${AGENT_INSTALL_DIR}/${bundle.fileName}"`;
    const script =
      `__f=${file}; [ -f "$__f" ] || { echo ${NEED_AGENT}; mkdir -p "\${__f%/*}" && head -c ${bundle.bytes.length} > "$__f.$$" && mv -f "$__f.$$" "$__f"; } || exit 126; ` +
      `exec node ${NODE_FLAGS} "$__f" serve --idle-exit-s ${IDLE_EXIT_S}`;
    let onLine: (line: Buffer) => void = () => {};
    let onClose: () => void = () => {};
    let isClosed = false;
    const resident = { readBytes: 0 } as Resident;
    // Output may come before commands.run has returned the handle: sends wait for it.
    let giveHandle: (h: CommandHandle) => void = () => {};
    const handleReady = new Promise<CommandHandle>((resolve) => (giveHandle = resolve));
    const feed = lineSplitter(
      (line) => {
        resident.readBytes += line.length + 1;
        if (line.toString('latin1') === NEED_AGENT) void send(bundle.bytes).catch(() => close());
        else onLine(line);
      },
      () => close(),
    );
    const close = () => {
      if (isClosed) return;
      isClosed = true;
      onClose();
    };
    // Requests go one at a time: each SendInput is a request of its own, and envd must not interleave two frames.
    let queue: Promise<void> = Promise.resolve();
    const send = (data: string | Buffer): Promise<void> => {
      const sent = queue.then(async () => (await handleReady).sendStdin(typeof data === 'string' ? data : new Uint8Array(data)));
      queue = sent.catch(() => close());
      return sent;
    };
    const handle = await sandbox.commands.run(script, {
      background: true,
      stdin: true,
      timeoutMs: 0,
      // The resident's frames are ASCII, so the SDK's UTF-8 decoding gives back exactly its bytes.
      onStdout: (text: string) => feed(Buffer.from(text, 'latin1')),
      onStderr: () => {},
    });
    resident.handle = handle;
    giveHandle(handle);
    handle.wait().then(close, close);
    const transport: LineTransport = {
      write: (line) => void send(line + '\n').catch(() => undefined),
      start(lineCb, closeCb) {
        onLine = lineCb;
        onClose = closeCb;
        if (isClosed) closeCb();
      },
      // A resident outside the protocol is killed: its tasks go on under their own supervisors.
      close: () => {
        close();
        void handle.kill().catch(() => false);
      },
    };
    resident.channel = await ResidentChannel.open(transport, GREETING_TIMEOUT_MS);
    return resident;
  }
}

/** Closes a resident's input once it answered everything: it exits, its tasks go on under their own supervisors. */
function retire(resident: Resident): void {
  const closeWhenIdle = (): void => {
    if (!resident.channel.isOpen) return;
    if (resident.channel.pendingCount > 0) {
      setTimeout(closeWhenIdle, 1000).unref();
      return;
    }
    end(resident);
  };
  closeWhenIdle();
}

/** Ends a resident: end of its input (it exits; its channel closes with it). */
function end(resident: Resident): void {
  resident.handle.closeStdin().catch(() => resident.handle.kill().catch(() => false));
}
