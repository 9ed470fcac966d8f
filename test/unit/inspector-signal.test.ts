// Which Node options keep SIGUSR1 from opening an inspector in the processes the server starts:
// `--disable-sigusr1` only where the Node that runs them certainly has it.
import { describe, expect, it } from 'vitest';
import { noInspectorSignalFlags } from '../../host/util/inspector-signal.js';

describe('noInspectorSignalFlags', () => {
  const withFlag = new Set(['--disable-sigusr1', '--max-old-space-size']);
  it('passes --disable-sigusr1 to the Node running this code when it knows the flag', () => {
    expect(noInspectorSignalFlags('/usr/bin/node', withFlag, '/usr/bin/node')).toEqual(['--disable-sigusr1']);
  });
  it('passes nothing where the flag is unknown (Node 20) or the Node is another one, whose flags are not known', () => {
    expect(noInspectorSignalFlags('/usr/bin/node', new Set(['--max-old-space-size']), '/usr/bin/node')).toEqual([]);
    expect(noInspectorSignalFlags('/opt/other/node', withFlag, '/usr/bin/node')).toEqual([]);
  });
  it('matches what the running Node offers', () => {
    const expected = process.allowedNodeEnvironmentFlags.has('--disable-sigusr1') ? ['--disable-sigusr1'] : [];
    expect(noInspectorSignalFlags(process.execPath)).toEqual(expected);
  });
});
