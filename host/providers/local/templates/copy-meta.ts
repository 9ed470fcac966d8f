// The helper a snapshot's copy asks for what node cannot do (helpers/copy-meta.pl): copy extended
// attributes, make whiteouts, FIFOs and sockets. One perl process per copy; requests are queued,
// sent in one write per batch (`flush`), and answered in order, one line each.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { constants as fsConstants } from 'node:fs';
import { constants as osConstants } from 'node:os';
import { perlCommand, type SYSCALL_NUMBERS } from '../launch/perl-helpers.js';

/** How to run the helper: perl, the helper's text, this machine's architecture. */
export interface CopyMetaHelper {
  perl: string;
  text: string;
  arch: keyof typeof SYSCALL_NUMBERS;
}

const ERRNO_NAMES = new Map(Object.entries(osConstants.errno).map(([name, n]) => [n, name]));

/** The errno's name (ESTALE…) for an answer's number; null for 0 (done). */
function errnoName(n: number): string | null {
  return n === 0 ? null : (ERRNO_NAMES.get(n) ?? `errno ${n}`);
}

/** A running helper. Every request resolves with null (done) or the errno's name that stopped it. */
export class CopyMeta {
  private readonly child: ChildProcessWithoutNullStreams;
  private readonly waiting: ((answer: string | null) => void)[] = [];
  private pending: Buffer[] = [];
  private failed: Error | null = null;
  private rest = '';

  constructor(helper: CopyMetaHelper) {
    const { O_RDONLY, O_NONBLOCK, O_NOFOLLOW } = fsConstants;
    const cmd = perlCommand(helper.perl, helper.text, helper.arch, [
      String(O_RDONLY | O_NONBLOCK | O_NOFOLLOW),
      String(osConstants.errno.ESTALE),
    ]);
    this.child = spawn(cmd.file, cmd.args, { stdio: ['pipe', 'pipe', 'pipe'], env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' } });
    this.child.stdout.setEncoding('utf8');
    this.child.stdout.on('data', (text: string) => this.hear(text));
    this.child.stderr.resume();
    this.child.stdin.on('error', (e) => this.fail(e));
    this.child.once('error', (e) => this.fail(e));
    this.child.once('close', () => this.fail(new Error('copy-meta helper ended')));
  }

  /** Copies the extended attributes of `src` (a /proc/<pid>/fd/<dir>/<name> path, not followed) to `dst`. */
  copyXattrs(src: string, dst: string, kind: 'd' | 'f'): Promise<string | null> {
    return this.ask(['x', src, dst, kind]);
  }

  /** Makes the whiteout, FIFO or socket `dst` with `mode` (its type bits included). */
  makeNode(dst: string, mode: number): Promise<string | null> {
    return this.ask(['n', dst, String(mode), '0']);
  }

  /** Marks the directory `dst` opaque for overlay: its attribute `name` (`trusted.overlay.opaque` or `user.overlay.opaque`) set to `y`. */
  markOpaque(dst: string, name: 'trusted.overlay.opaque' | 'user.overlay.opaque'): Promise<string | null> {
    return this.ask(['o', dst, name]);
  }

  /** Sends what was asked since the last flush. */
  flush(): void {
    if (this.pending.length === 0 || this.failed) return;
    this.child.stdin.write(Buffer.concat(this.pending));
    this.pending = [];
  }

  /** Ends the helper. */
  close(): void {
    this.child.stdin.end();
    if (this.child.exitCode === null) this.child.kill();
  }

  private ask(fields: string[]): Promise<string | null> {
    if (this.failed) return Promise.reject(this.failed);
    // Fields are never empty and never hold a NUL (paths cannot): one NUL between, two at the end.
    this.pending.push(Buffer.from(fields.join('\0') + '\0\0'));
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  private hear(text: string): void {
    const lines = (this.rest + text).split('\n');
    this.rest = lines.pop()!;
    for (const line of lines) this.waiting.shift()?.(errnoName(Number(line)));
  }

  private fail(e: Error): void {
    if (this.failed) return;
    this.failed = e;
    // Anything still waiting: the helper is gone, which the caller reports as its own failure.
    for (const resolve of this.waiting.splice(0)) resolve('EHELPER');
  }
}
