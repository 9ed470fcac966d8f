// Which of a sandbox's processes stop_processes ends (host/providers/local/exec/stop-processes.ts
// leftovers): with a resident agent (issue 21), its own process and every task it started — the
// supervisor (the resident's child until the resident goes) and its command's group — stay; what
// run_command left running (a child of the resident in a group of its own) goes.
import { describe, expect, it } from 'vitest';
import { leftovers, type SandboxProcess } from '../../host/providers/local/exec/stop-processes.js';

const PID1 = 10;
const AGENT = '/home/user/.sandbox-mcp/agent/agent-0123abcd.cjs';
const proc = (pid: number, ppid: number, pgid: number, argv: string[]): SandboxProcess => ({ pid, ppid, pgid, startTime: '1', argv });

describe('stop_processes leftovers with a resident agent', () => {
  it('keeps the resident, a task it started (supervisor, command group) and a classic task; stops the rest', () => {
    const procs = [
      proc(11, PID1, 11, ['sleep', '86400']),
      proc(20, PID1, 20, ['/usr/bin/node', '--max-old-space-size=32', '--v8-pool-size=1', AGENT, 'serve']),
      // A start (or promotable exec) through the resident: its supervisor, the resident's child, and its command's group.
      proc(30, 20, 30, ['node', AGENT, 'supervise', '/home/user/.local/state/sandbox-agent/tasks/t1']),
      proc(31, 30, 31, ['/bin/bash', '-c', 'make']),
      proc(32, 31, 31, ['cc', 'x.c']),
      // A classic task: a supervisor under pid 1 and its command's group.
      proc(40, PID1, 40, ['node', AGENT, 'supervise', '/home/user/.local/state/sandbox-agent/tasks/t2']),
      proc(41, 40, 41, ['sleep', '600']),
      // Leftovers: run_command's background server (spawned by the resident in its own group), a setsid'd one, a nohup'd child.
      proc(50, 20, 50, ['python3', '-m', 'http.server']),
      proc(51, PID1, 51, ['sleep', '1000']),
      proc(52, 50, 50, ['sleep', '5']),
      // A plain exec the resident runs right now: its group is stopped, as any command still running is.
      proc(60, 20, 60, ['/bin/bash', '-c', 'sleep 300']),
      proc(61, 60, 60, ['sleep', '300']),
    ];
    expect(leftovers(procs, PID1).map((p) => p.pid)).toEqual([50, 51, 52, 60, 61]);
  });
});
