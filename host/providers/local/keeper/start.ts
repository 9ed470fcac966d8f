// Starting a sandbox's keeper (keeper.ts), on the server's side: a detached node process with
// covered descriptors, and its one-line JSON report on fd 3 within a bounded wait.
import { spawn } from 'node:child_process';
import type { Readable } from 'node:stream';
import { ProviderError } from '../../provider-error.js';
import { LOCAL_DETAILS, spawnFailureError } from '../errors.js';
import { sandboxPath } from '../launch/environment.js';
import type { LocalSettings } from '../settings.js';
import { sameFile } from '../../../util/inspector-signal.js';
import { DEBUG_ENV, isDebugOn } from '../../../util/log.js';
import { coverInherited } from '../system/inherited-fds.js';
import { keeperCollectionFlags, lineFlags, SMALL_HEAP_FLAGS } from './node-flags.js';
import type { KeeperReport } from './report.js';

/** What starting a keeper needs from the provider's settings. */
export type KeeperStartOpts = Pick<LocalSettings, 'nodePath' | 'keeperScript' | 'startTimeoutMs' | 'cover'>;

/**
 * Spawns the detached keeper of the sandbox in `dir` and resolves with its report; rejects with a
 * ProviderError (and SIGKILLs the keeper) when it cannot start or reports nothing in time.
 */
export function startKeeper(dir: string, opts: KeeperStartOpts): Promise<KeeperReport> {
  return new Promise((resolvePromise, reject) => {
    const env: Record<string, string> = { PATH: process.env.PATH ?? sandboxPath() };
    const isDebug = isDebugOn(process.env);
    if (isDebug) env[DEBUG_ENV] = '1';
    // A small heap keeps each idle keeper light; it holds no data. No --disable-sigusr1: Node
    // then leaves SIGUSR1 blocked in every thread, so the keeper would never see set_sandbox_timeout's
    // SIGUSR1 and would act on a shortened deadline only at its recheck timer; its own listener
    // from main.ts's first statement keeps the inspector closed (see inspector-signal.ts).
    // The V8 flags of the server's own line only: another node (a nodePath option) gets none it
    // might not know. One platform worker on any machine (0 meant one per core but one): a keeper
    // then needs 3 processes and threads before its first line runs, everywhere (its process,
    // node's delayed-task thread, the worker; system/user-processes.ts).
    const nodeFlags = [
      ...SMALL_HEAP_FLAGS,
      '--v8-pool-size=1',
      ...(sameFile(opts.nodePath, process.execPath)
        ? [...lineFlags(process.versions.v8), ...keeperCollectionFlags(process.versions.v8)]
        : []),
    ];
    // One malloc arena: the keeper's few threads hardly allocate, and a second arena is some
    // 0.3 MiB of an idle keeper. Nothing in a sandbox inherits the keeper's environment.
    env.MALLOC_ARENA_MAX = '1';
    const child = spawn(opts.nodePath, [...nodeFlags, opts.keeperScript, dir], {
      cwd: '/',
      env,
      detached: true,
      stdio: coverInherited(['ignore', 'ignore', isDebug ? 2 : 'ignore', 'pipe'], opts.cover),
    });
    const pipe = child.stdio[3] as Readable;
    let text = '';
    let isDone = false;
    const finish = (r: KeeperReport | Error): void => {
      if (isDone) return;
      isDone = true;
      clearTimeout(timer);
      pipe.destroy();
      child.unref();
      if (r instanceof Error) {
        try {
          child.kill('SIGKILL');
        } catch {
          // Already gone.
        }
        reject(r);
      } else resolvePromise(r);
    };
    const timer = setTimeout(
      () => finish(new ProviderError('timeout', { code: 'start_timeout', detail: LOCAL_DETAILS.startTimeout })),
      opts.startTimeoutMs + 5_000,
    );
    // Out of processes or memory is no missing bundle: it is said as what it is.
    child.on('error', (err: NodeJS.ErrnoException) =>
      finish(spawnFailureError(err, new ProviderError('unavailable', { detail: LOCAL_DETAILS.hostBundleMissing }))),
    );
    pipe.on('error', () => {});
    pipe.on('data', (b: Buffer) => {
      text += b.toString('utf8');
      const nl = text.indexOf('\n');
      if (nl < 0) return;
      try {
        finish(JSON.parse(text.slice(0, nl)) as KeeperReport);
      } catch {
        finish(new ProviderError('internal'));
      }
    });
    pipe.on('end', () => finish(new ProviderError('internal', { code: 'keeper_failed' })));
  });
}
