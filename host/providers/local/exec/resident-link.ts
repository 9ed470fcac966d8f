// Channels from this provider instance to its sandboxes' resident agents (keeper/resident.ts),
// one per sandbox, through the keeper's relay socket; and when there is none. A sandbox whose
// keeper record names no resident is from an older keeper: its agent calls and commands run as
// processes of their own, as before, for as long as it lives. A resident that does not greet in
// time (starting, or restarting after a crash) is not waited for: the call runs the old way and
// the channel is tried again a little later. An idle channel is closed after a while.
import { connect } from 'node:net';
import { join } from 'node:path';
import { lineSplitter } from '../../../../shared/frame-lines.js';
import { ResidentChannel, type LineTransport } from '../../resident-channel.js';
import type { LiveSandbox } from '../sandbox/registry.js';
import { AGENT_SOCKET } from '../sandbox/state-dir.js';

/** How long a new connection waits for the resident's greeting. */
const GREETING_TIMEOUT_MS = 5000;
/** After a resident did not answer, how long calls run the old way before it is tried again. */
const RETRY_AFTER_MS = 1000;
/** An unused channel is closed after this long. */
const IDLE_CLOSE_MS = 5 * 60_000;
/** The longest path a Unix socket address holds (sun_path, less its terminating NUL). */
const MAX_SOCKET_PATH_BYTES = 107;

interface Link {
  /** The keeper this link is to (a sandbox id is never reused, but a record could be stale). */
  keeperPid: number;
  channel: ResidentChannel | null;
  opening: Promise<ResidentChannel | null> | null;
  retryAtMs: number;
  idleTimer: NodeJS.Timeout | undefined;
}

/** The resident channels of one provider instance. */
export class ResidentLinks {
  private readonly links = new Map<string, Link>();

  /** The sandbox's open channel, or null: no resident (older keeper), or none answering now. */
  async channel(sb: LiveSandbox): Promise<ResidentChannel | null> {
    if (!sb.keeper.resident) return null;
    let link = this.links.get(sb.id);
    if (!link || link.keeperPid !== sb.keeper.keeper.pid) {
      link?.channel?.close();
      link = { keeperPid: sb.keeper.keeper.pid, channel: null, opening: null, retryAtMs: 0, idleTimer: undefined };
      this.links.set(sb.id, link);
    }
    this.touch(sb.id, link);
    if (link.channel?.isOpen) return link.channel;
    if (link.opening) return link.opening;
    if (Date.now() < link.retryAtMs) return null;
    const opening = this.open(sb, link);
    link.opening = opening;
    return opening;
  }

  /** Closes the sandbox's channel (it was killed). */
  forget(sandboxId: string): void {
    const link = this.links.get(sandboxId);
    this.links.delete(sandboxId);
    if (link) {
      clearTimeout(link.idleTimer);
      link.channel?.close();
    }
  }

  /** Closes every channel. */
  closeAll(): void {
    for (const id of [...this.links.keys()]) this.forget(id);
  }

  private async open(sb: LiveSandbox, link: Link): Promise<ResidentChannel | null> {
    try {
      const channel = await ResidentChannel.open(socketTransport(residentSocketPath(sb.dir, sb.keeper.keeper.pid)), GREETING_TIMEOUT_MS);
      link.channel = channel;
      channel.onClosed(() => {
        if (link.channel === channel) link.channel = null;
      });
      return channel;
    } catch {
      link.retryAtMs = Date.now() + RETRY_AFTER_MS;
      return null;
    } finally {
      link.opening = null;
    }
  }

  private touch(sandboxId: string, link: Link): void {
    clearTimeout(link.idleTimer);
    link.idleTimer = setTimeout(() => {
      if (this.links.get(sandboxId) === link) this.forget(sandboxId);
    }, IDLE_CLOSE_MS);
    link.idleTimer.unref();
  }
}

/** Where a server reaches a sandbox's relay: its path, or through the keeper's working directory when too long. */
export function residentSocketPath(dir: string, keeperPid: number): string {
  const direct = join(dir, AGENT_SOCKET);
  return Buffer.byteLength(direct) <= MAX_SOCKET_PATH_BYTES ? direct : `/proc/${keeperPid}/cwd/${AGENT_SOCKET}`;
}

/** A LineTransport over a Unix socket connection to `path`. */
function socketTransport(path: string): LineTransport {
  const socket = connect(path);
  socket.setNoDelay?.(true);
  socket.unref();
  return {
    write: (line) => void socket.write(line + '\n', 'latin1'),
    start(onLine, onClose) {
      let isClosed = false;
      const close = () => {
        if (isClosed) return;
        isClosed = true;
        socket.destroy();
        onClose();
      };
      socket.on('data', lineSplitter(onLine, close));
      socket.on('error', close);
      socket.on('close', close);
    },
    close: () => socket.destroy(),
    setBusy: (isBusy) => void (isBusy ? socket.ref() : socket.unref()),
  };
}
