// Which of a sandbox's processes stop_processes ends (host/providers/local/exec/stop-processes.ts
// leftovers): with a resident agent (issue 21), its own process and every task it handed over —
// the wrapper that is the command's parent, the command's group, the adopting supervisor — stay;
// what run_command left running (a child of the resident in a group of its own) goes.
import { describe, expect, it } from 'vitest';
import { leftovers, type SandboxProcess } from '../../host/providers/local/exec/stop-processes.js';

const PID1 = 10;
const AGENT = '/home/user/.sandbox-mcp/agent/agent-0123abcd.cjs';
const proc = (pid: number, ppid: number, pgid: number, argv: string[], isJobWrapper = false): SandboxProcess => ({
  pid,
  ppid,
  pgid,
  startTime: '1',
  argv,
  isJobWrapper,
});
const WRAPPER = ['/bin/bash', '-c', 'exec 7>&2 2>/dev/null …', 'sandbox-task', 'make', `exec env -i node ${AGENT} supervise --adopt /d`];

describe('stop_processes leftovers with a resident agent', () => {
  it('keeps the resident, a handed-over task (wrapper, command group, adopter) and a classic task; stops the rest', () => {
    const procs = [
      proc(11, PID1, 11, ['sleep', '86400']),
      proc(20, PID1, 20, ['/usr/bin/node', '--max-old-space-size=32', '--v8-pool-size=1', AGENT, 'serve']),
      // A promotable exec handed over: the wrapper (child of the resident), its job and the adopter.
      proc(30, 20, 30, WRAPPER, true),
      proc(31, 30, 31, WRAPPER),
      proc(32, 31, 31, ['cc', 'x.c']),
      proc(33, 30, 33, ['node', AGENT, 'supervise', '--adopt', '/home/user/.local/state/sandbox-agent/tasks/t1']),
      // A classic task: a supervisor under pid 1 and its command's group.
      proc(40, PID1, 40, ['node', AGENT, 'supervise', '/home/user/.local/state/sandbox-agent/tasks/t2']),
      proc(41, 40, 41, ['sleep', '600']),
      // Leftovers: run_command's background server (spawned by the resident in its own group), a setsid'd one, a nohup'd child.
      proc(50, 20, 50, ['python3', '-m', 'http.server']),
      proc(51, PID1, 51, ['sleep', '1000']),
      proc(52, 50, 50, ['sleep', '5']),
      // A command the resident runs right now (a call's window): its wrapper and watcher are the
      // agent's machinery; the command's own group is stopped, as any command still running is.
      proc(60, 20, 60, WRAPPER, true),
      proc(61, 60, 61, WRAPPER, true),
      proc(62, 60, 62, WRAPPER),
      proc(63, 62, 62, ['sleep', '300']),
    ];
    expect(leftovers(procs, PID1).map((p) => p.pid)).toEqual([50, 51, 52, 62, 63]);
  });
});
