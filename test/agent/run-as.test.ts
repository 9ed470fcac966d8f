// Protocol minor 8, through the built agent as separate processes: a per-call `start` run with
// RUN_AS_ENV starts the task's command as those ids (an image's user), while the supervisor stays
// the agent's own (root here); the variable reaches neither; a value that is not UID:GID is refused.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { RUN_AS_ENV } from '../../shared/protocol.js';
import { call, callView, newTaskId, taskDirOf, waitTerminal, worldsPerTest } from '../support/agent-world.js';
import { requireBuild } from '../support/prerequisites.js';

beforeAll(() => requireBuild());

const { world } = worldsPerTest();
const isRoot = process.geteuid?.() === 0;

describe('run as (RUN_AS_ENV)', () => {
  it.skipIf(!isRoot)("starts the command as the ids it names, none of root's, the supervisor staying root", async () => {
    const w = world({ [RUN_AS_ENV]: '65534:65533' });
    const id = newTaskId();
    await callView(w, {
      protocol: 1,
      op: 'start',
      task_id: id,
      cwd: '/',
      command: `id -u; id -g; id -G; grep CapEff /proc/self/status; env | grep -c ${RUN_AS_ENV} || true; cat /proc/$PPID/status | grep -c '^Uid:.0' || true`,
    });
    expect(await waitTerminal(w, id)).toMatchObject({
      state: 'succeeded',
      // No variable left; its parent, the supervisor, is root.
      stdout: '65534\n65533\n65533\nCapEff:\t0000000000000000\n0\n1\n',
    });
    expect(readFileSync(join(taskDirOf(w, id), 'request.json'), 'utf8')).toContain('"run_as":{"uid":65534,"gid":65533}');
  });

  it('refuses a value that is not UID:GID, and starts nothing', async () => {
    for (const value of ['', 'app', '1000', '-1:0', '1000:1000:1']) {
      const w = world({ [RUN_AS_ENV]: value });
      const r = await call(w, { protocol: 1, op: 'start', task_id: newTaskId(), command: 'true' });
      expect(r.ok ? null : r.error).toMatchObject({ code: 'invalid_request', message: `${RUN_AS_ENV} must be UID:GID` });
    }
  });
});
