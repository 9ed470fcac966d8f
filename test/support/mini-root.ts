// A small root filesystem made from a few of the host's own programs and the libraries they link
// (as ldd lists them), for template tests that need a real root but not a minute of mmdebstrap:
// bash and sh, a handful of coreutils, /etc/passwd and the directories a sandbox expects.
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, realpathSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { removeAtEnd, scratchDir } from './scratch.js';

/** The programs a mini root holds (under /usr/bin, with the merged-usr links /bin, /lib, /lib64). */
export const MINI_ROOT_PROGRAMS = [
  'bash', 'sh', 'ls', 'cat', 'id', 'head', 'tail', 'stat', 'mkdir', 'mv', 'rm', 'sleep', 'touch', 'dirname', 'df', 'wc', 'env',
  'find', 'grep', 'tr', 'cut', 'printf', 'echo', 'true', 'false', 'readlink', 'ln', 'chmod', 'du', 'kill', 'ps', 'dd', 'seq', 'sort',
  'mkfifo', 'base64', 'sha256sum', 'cp', 'xargs', 'sed', 'tar', 'gzip',
]; // prettier-ignore

/** The libraries `program` links, as ldd names them (absolute paths). */
function librariesOf(program: string): string[] {
  const text = execFileSync('ldd', [program], { encoding: 'utf8' });
  return [...text.matchAll(/(\/\S+) \(0x/g)].map((m) => m[1]!);
}

/** Copies a host file to the same path under `root`, following links to the file itself. */
function copyIn(root: string, hostPath: string): void {
  const dest = join(root, hostPath);
  if (existsSync(dest)) return;
  mkdirSync(dirname(dest), { recursive: true });
  copyFileSync(realpathSync(hostPath), dest);
  chmodSync(dest, 0o755);
}

/** Makes a mini root in a new directory and returns its path (removed when the test file ends). */
export function makeMiniRootDir(): string {
  const root = scratchDir('mini-root-');
  for (const dir of ['usr/bin', 'usr/lib', 'usr/lib64', 'etc', 'home', 'tmp', 'var/tmp', 'proc', 'dev', 'root']) {
    mkdirSync(join(root, dir), { recursive: true });
  }
  chmodSync(join(root, 'tmp'), 0o1777);
  chmodSync(join(root, 'var/tmp'), 0o1777);
  for (const link of ['bin', 'lib', 'lib64', 'sbin']) symlinkSync(link === 'sbin' ? 'usr/bin' : `usr/${link}`, join(root, link));
  for (const name of MINI_ROOT_PROGRAMS) {
    const host = execFileSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).trim();
    if (!host.startsWith('/')) continue;
    const real = realpathSync(host);
    const dest = join(root, 'usr/bin', name);
    copyFileSync(real, dest);
    chmodSync(dest, 0o755);
    for (const lib of librariesOf(real)) copyIn(root, lib.replace(/^\/(lib|lib64)\//, '/usr/$1/'));
  }
  writeFileSync(join(root, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/bash\nuser:x:1000:1000::/home/user:/bin/bash\n');
  writeFileSync(join(root, 'etc/group'), 'root:x:0:\nuser:x:1000:\n');
  writeFileSync(join(root, 'etc/mini-root'), 'made by test/support/mini-root.ts\n');
  return root;
}

/** Makes a mini root and packs it as a tar archive (as docker export writes one: members without `./`); returns its path. */
export function makeMiniRootTar(): string {
  const root = makeMiniRootDir();
  const tar = removeAtEnd(`${root}.tar`);
  execFileSync('tar', [
    '-cf',
    tar,
    '-C',
    root,
    '--numeric-owner',
    ...execFileSync('ls', ['-A', root], { encoding: 'utf8' }).split('\n').filter(Boolean),
  ]);
  return tar;
}
