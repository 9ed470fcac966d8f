// What a person sees while `template build` runs (about a minute): on a terminal, one line
// rewritten in place — a spinner, mmdebstrap's current phase and the time so far — with its
// warnings and errors printed above it; elsewhere (a log, a pipe) mmdebstrap's own progress,
// warning and error lines as they come. Either way the last lines of everything it printed are
// kept, for the end of a failed build.

/** Where progress goes: stderr, as the CLI has it. */
export interface ProgressStream {
  isTTY?: boolean;
  columns?: number;
  write(text: string): unknown;
}

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
/** Lines kept for a failure's report. */
const TAIL_LINES = 20;
/** How often the spinner turns. */
export const SPIN_INTERVAL_MS = 100;

/** mmdebstrap's progress (`I:`), warning (`W:`) and error (`E:`) lines; the rest is apt's and dpkg's chatter. */
function kindOf(line: string): 'progress' | 'notice' | 'chatter' {
  if (line.startsWith('I: ')) return 'progress';
  if (line.startsWith('W: ') || line.startsWith('E: ')) return 'notice';
  return 'chatter';
}

/** The phase a progress line names, as shown after the spinner: `installing essential packages`. */
export function phaseOf(line: string): string {
  return line
    .slice(3)
    .replace(/\.\.\.$/, '')
    .replace(/ (directly|in shell): .*$/, '');
}

function clock(ms: number): string {
  const s = Math.floor(ms / 1000);
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
}

/** Shows one build's progress on `stream` (see the module comment). */
export class BuildProgress {
  private readonly tail: string[] = [];
  private phase = 'starting mmdebstrap';
  private frame = 0;
  private timer: NodeJS.Timeout | undefined;
  private readonly startedAtMs: number;
  private readonly isTerminal: boolean;

  constructor(
    private readonly stream: ProgressStream,
    private readonly label: string,
    private readonly now: () => number = Date.now,
  ) {
    this.startedAtMs = now();
    this.isTerminal = stream.isTTY === true;
    if (this.isTerminal) {
      this.render();
      this.timer = setInterval(() => {
        this.frame = (this.frame + 1) % FRAMES.length;
        this.render();
      }, SPIN_INTERVAL_MS);
      this.timer.unref();
    } else {
      this.stream.write(`${label}: started\n`);
    }
  }

  /** One line mmdebstrap printed. */
  line(text: string): void {
    this.tail.push(text);
    if (this.tail.length > TAIL_LINES) this.tail.shift();
    const kind = kindOf(text);
    if (kind === 'progress') this.phase = phaseOf(text);
    if (!this.isTerminal) {
      if (kind !== 'chatter') this.stream.write(`${text}\n`);
      return;
    }
    if (kind === 'notice') this.stream.write(`\r\x1b[K${text}\n`);
    this.render();
  }

  /** Milliseconds since the build started. */
  elapsedMs(): number {
    return this.now() - this.startedAtMs;
  }

  /** Stops the spinner; on failure prints the last lines mmdebstrap printed. */
  finish(isSuccess: boolean): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    if (this.isTerminal) this.stream.write('\r\x1b[K');
    if (!isSuccess && this.tail.length > 0) {
      this.stream.write(`${this.label}: the last lines mmdebstrap printed:\n${this.tail.map((l) => `  ${l}\n`).join('')}`);
    }
  }

  private render(): void {
    const text = `${FRAMES[this.frame]} ${this.label}: ${this.phase} (${clock(this.elapsedMs())})`;
    const width = (this.stream.columns ?? 80) - 1;
    this.stream.write(`\r\x1b[K${text.length > width ? text.slice(0, width) : text}`);
  }
}
