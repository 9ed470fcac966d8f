// The in-sandbox agent, bundled into one CommonJS file (dist/agent.cjs):
//   node agent.cjs call <base64url JSON>   one protocol request, one JSON line on stdout
//   node agent.cjs selftest                checks this sandbox, prints a JSON report
//   node agent.cjs serve [--idle-exit-s N] the resident agent: request frames on stdin (serve.ts)
//   node agent.cjs supervise <task dir>    internal: the detached per-task supervisor
//   node agent.cjs supervise --warm [--shell-socket-fd-3]   internal: one the resident hands tasks to, one after another (warm-supervisor.ts)
// Node's child_process and net modules are loaded only by the modes that spawn (start,
// selftest, supervise, serve): they cost several milliseconds, and `get` must start as fast as node.
import './zod-jitless.js';
import { writeSync } from 'node:fs';
import { handleCall } from './call.js';
import { runSelftest } from './selftest.js';
import { runResident } from './serve.js';
import { runSupervisor } from './supervisor.js';
import { awaitHandover, SHELL_SOCKET_ARG, tellFree } from './warm-supervisor.js';

const [mode, arg] = process.argv.slice(2);

/**
 * Node opens its inspector (a debugger on a loopback port of the sandbox's network, the host's
 * with `network: host`) on SIGUSR1 unless a listener is installed: the long-lived modes keep one
 * for their whole life, as the server and the keeper do (host/util/inspector-signal.ts).
 */
function keepInspectorClosed(): void {
  process.on('SIGUSR1', () => {});
}

async function main(): Promise<number> {
  switch (mode) {
    case 'call': {
      const response = await handleCall(arg);
      await writeLine(JSON.stringify(response));
      return 0;
    }
    case 'selftest': {
      const report = await runSelftest();
      await writeLine(JSON.stringify(report, null, 2));
      return report.ok ? 0 : 1;
    }
    case 'supervise': {
      keepInspectorClosed();
      if (arg === '--warm') {
        // Only the first task may come with a shell started ahead: the socket for it is inherited once.
        let hasShellSocket = process.argv.includes(SHELL_SOCKET_ARG);
        for (;;) {
          const task = await awaitHandover(hasShellSocket);
          if (!task) return 0; // retired, or its resident is gone: it is nobody's supervisor now
          hasShellSocket = false;
          process.chdir(task.dir);
          if (!(await runSupervisor(task.dir, task.env, task.made, true))) return 0;
          // Out of the task's directory (remove waits for that), then free for the next (or gone with the resident).
          process.chdir('/');
          if (!tellFree()) return 0;
        }
      } else await runSupervisor(arg ?? '');
      return new Promise<number>(() => {}); // the supervisor exits by itself
    }
    case 'serve':
      keepInspectorClosed();
      await runResident(process.argv.slice(3));
      return new Promise<number>(() => {}); // the resident exits by itself
    default:
      process.stderr.write('usage: agent.cjs call <base64url JSON> | selftest | serve\n');
      return 2;
  }
}

/**
 * Writes straight to fd 1: touching process.stdout loads node's stream machinery (~3 ms).
 * A pipe left non-blocking by the caller can refuse a write (EAGAIN); wait briefly and retry.
 */
async function writeLine(text: string): Promise<void> {
  const bytes = Buffer.from(text + '\n');
  let off = 0;
  while (off < bytes.length) {
    try {
      off += writeSync(1, bytes, off, bytes.length - off);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') throw err;
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (process.env.AGENT_DEBUG) process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
    process.exit(70);
  },
);
