// The one /proc/<pid>/stat parser, shared by the agent and the local provider.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseProcStat } from '../../shared/proc-stat.js';

/**
 * A stat line as the kernel writes it, with the given command name and fields 3, 5, 9 and 22 (the
 * parent, field 4, is 1; user and system time, fields 14 and 15, 7 and 5; threads, field 20, 3).
 */
function statLine(comm: string, state: string, pgid: number, flags: number, startTime: number): string {
  const faults = ['0', '0', '0', '0'];
  const times = ['7', '5', '0', '0'];
  const after = [
    state,
    '1',
    String(pgid),
    '4',
    '0',
    '-1',
    String(flags),
    ...faults,
    ...times,
    '20',
    '0',
    '3',
    '0',
    String(startTime),
    '0',
    '0',
  ];
  return `4242 (${comm}) ${after.join(' ')}\n`;
}

describe('parseProcStat', () => {
  it('reads state, parent, pgid, flags, CPU time, threads and start time from the fields after the command name', () => {
    expect(parseProcStat(statLine('sleep', 'S', 77, 4194560, 123456))).toEqual({
      state: 'S',
      ppid: 1,
      pgid: 77,
      flags: 4194560,
      cpuTicks: 12,
      threads: 3,
      startTime: 123456,
    });
  });

  it('is not misled by spaces and parentheses in the command name', () => {
    expect(parseProcStat(statLine('a) Z 1 2 (b', 'R', 9, 64, 99))).toEqual({
      state: 'R',
      ppid: 1,
      pgid: 9,
      flags: 64,
      cpuTicks: 12,
      threads: 3,
      startTime: 99,
    });
  });

  it('returns null for text not shaped like a stat line', () => {
    for (const text of ['', 'garbage', '1 (x) S 1', statLine('x', 'S', 1, 0, 5).replace(/ 5 0 0\n$/, ' late 0 0\n')]) {
      expect(parseProcStat(text), JSON.stringify(text)).toBeNull();
    }
  });

  it('reads a real process: a stopped child leading its own group', async () => {
    const child = spawn('sleep', ['30'], { detached: true, stdio: 'ignore' });
    try {
      const pid = child.pid!;
      process.kill(pid, 'SIGSTOP');
      const read = () => parseProcStat(readFileSync(`/proc/${pid}/stat`, 'latin1'));
      for (let i = 0; i < 200 && read()?.state !== 'T'; i++) await new Promise((r) => setTimeout(r, 10));
      const stat = read();
      expect(stat).toMatchObject({ state: 'T', pgid: pid, ppid: process.pid, threads: 1 });
      // Its start time is fixed for its life, and later than ours.
      expect(read()?.startTime).toBe(stat?.startTime);
      expect(stat!.startTime).toBeGreaterThanOrEqual(parseProcStat(readFileSync('/proc/self/stat', 'latin1'))!.startTime);
    } finally {
      child.kill('SIGKILL');
    }
  });
});
