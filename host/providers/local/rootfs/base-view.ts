// What a base sandbox sees of the host: its system directories (/usr, and /bin, /sbin, /lib… as the
// host has them), read-only, and an /etc that is not the host's but a copy of the entries programs read — name
// resolution, certificates, the loader's cache, alternatives, locale and shell start-up files — and
// of every /etc entry a symbolic link under /usr points into (Java's conf, Python's sitecustomize…:
// without them programs in /usr break), minus what may hold secrets. Host configuration that may hold
// credentials (pip.conf, npmrc, gitconfig, wgetrc…) stays out unless the person binds it in
// (--sandbox-ro-bind). One copy per state of those entries, in the cache, bound read-only as /etc in
// one step: about 50 separate binds cost 10 ms per create (measured), one costs nothing.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
  type Stats,
} from 'node:fs';
import { dirname, join, posix } from 'node:path';
import { SANDBOX_HOSTNAME, SYSTEM_DIRS, type SystemDir } from '../launch/bwrap-args.js';
import { cachedDir } from './cache-dir.js';

/** What the host has at each of SYSTEM_DIRS: directories, merged-/usr symlinks; absent ones left out. */
export function hostSystemDirs(): SystemDir[] {
  const dirs: SystemDir[] = [];
  for (const path of SYSTEM_DIRS) {
    const st = statOrNull(path);
    if (st?.isSymbolicLink()) dirs.push({ path, link: readlinkSync(path) });
    else if (st?.isDirectory()) dirs.push({ path });
  }
  return dirs;
}

/** /etc entries every base sandbox sees, when the host has them. */
export const BASE_ETC_ENTRIES = [
  // name resolution and networking
  'nsswitch.conf', 'host.conf', 'gai.conf', 'resolv.conf', 'services', 'protocols', 'networks', 'rpc', 'ethertypes',
  'netconfig', 'bindresvport.blacklist',
  // certificates and TLS (never ssl/private)
  'ssl/certs', 'ssl/openssl.cnf', 'ca-certificates', 'ca-certificates.conf', 'pki', 'crypto-policies', 'gnutls',
  // the dynamic loader
  'ld.so.cache', 'ld.so.conf', 'ld.so.conf.d',
  // programs the system chose, time, locale, types
  'alternatives', 'localtime', 'timezone', 'locale.alias', 'locale.conf', 'default/locale', 'mime.types', 'magic', 'magic.mime',
  // shells and terminals
  'profile', 'profile.d', 'bash.bashrc', 'inputrc', 'shells', 'environment', 'terminfo',
  // what system this is
  'os-release', 'lsb-release', 'debian_version',
  // configuration that language runtimes and tools ship (no credentials)
  'python3', 'perl', 'fonts', 'vim', 'manpath.config', 'groff', 'xml', 'sgml', 'ssh/ssh_config', 'ssh/ssh_config.d', 'ImageMagick-6',
] as const; // prettier-ignore

/** Never copied, whatever points there: secrets and host identity. */
const NEVER = ['shadow', 'gshadow', 'shadow-', 'gshadow-', 'sudoers', 'sudoers.d', 'ssl/private', 'machine-id', 'subuid', 'subgid'];
const NEVER_PREFIXES = ['ssh/ssh_host_'];

/** The view's own files, the same in every base sandbox (passwd and group are bound over their placeholders per sandbox). */
const OWN_FILES: Record<string, string> = {
  hostname: `${SANDBOX_HOSTNAME}\n`,
  hosts: `127.0.0.1\tlocalhost ${SANDBOX_HOSTNAME}\n::1\tlocalhost ip6-localhost ip6-loopback\n`,
  passwd: '',
  group: '',
};

function isNever(entry: string): boolean {
  return NEVER.some((n) => entry === n || entry.startsWith(n + '/')) || NEVER_PREFIXES.some((p) => entry.startsWith(p));
}

/** The /etc entries (relative) that symbolic links under /usr point at: `find`, one walk of /usr. */
export function etcTargetsOfUsrLinks(usr = '/usr'): string[] {
  let out: string;
  try {
    // prettier-ignore
    out = execFileSync('find', [usr, '-xdev', '-type', 'l', '(', '-lname', '/etc/*', '-o', '-lname', '*../etc/*', ')', '-printf', '%h\\0%l\\0'], {
      encoding: 'utf8', env: { PATH: '/usr/bin:/bin' }, maxBuffer: 64 * 1024 * 1024, timeout: 120_000, stdio: ['ignore', 'pipe', 'ignore'],
    });
  } catch (e) {
    // find reports unreadable directories with status 1 and still prints the rest.
    out = typeof (e as { stdout?: unknown }).stdout === 'string' ? (e as { stdout: string }).stdout : '';
  }
  const fields = out.split('\0');
  const targets = new Set<string>();
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const target = posix.resolve(fields[i]!, fields[i + 1]!);
    if (target.startsWith('/etc/') && target.length > '/etc/'.length) targets.add(target.slice('/etc/'.length));
  }
  return [...targets].sort();
}

/**
 * What decides whether /usr may link into /etc differently since the last walk: the times of /etc
 * and of the directories a package install changes (a new package adds a directory to
 * /usr/share/doc; new programs and libraries land in bin/ and lib/). A heuristic; a change it
 * misses is picked up by the next walk it triggers.
 */
function usrFingerprint(): string {
  const dirs = ['/etc', '/etc/alternatives', '/usr', '/usr/bin', '/usr/sbin', '/usr/lib', '/usr/lib64', '/usr/libexec', '/usr/share',
    '/usr/share/doc', '/usr/lib/jvm', '/usr/local', '/usr/local/bin', '/usr/local/lib']; // prettier-ignore
  return dirs.map((d) => `${d}:${statOrNull(d)?.mtimeMs ?? '-'}`).join('|');
}

function statOrNull(path: string): Stats | null {
  try {
    return lstatSync(path);
  } catch {
    return null;
  }
}

/** etcTargetsOfUsrLinks, remembered in `cacheDir` until usrFingerprint changes (the walk takes a second or more). */
function cachedUsrTargets(cacheDir: string): string[] {
  const file = join(cacheDir, 'usr-etc-links.json');
  const fingerprint = usrFingerprint();
  try {
    const saved = JSON.parse(readFileSync(file, 'utf8')) as { fingerprint: string; targets: string[] };
    if (saved.fingerprint === fingerprint && Array.isArray(saved.targets)) return saved.targets;
  } catch {
    // None yet, or unreadable: walk.
  }
  const targets = etcTargetsOfUsrLinks();
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify({ fingerprint, targets }) + '\n', { mode: 0o600 });
  try {
    // The rename is atomic: a concurrent reader sees the old list or this one.
    renameSync(tmp, file);
  } catch {
    rmSync(tmp, { force: true });
  }
  return targets;
}

/** The /etc entries of the base view that this host has, top-level symlinks resolved where they leave /etc and /usr. */
export function baseEtcEntries(usrTargets: readonly string[], etc = '/etc'): string[] {
  const wanted = new Set<string>([...BASE_ETC_ENTRIES, ...usrTargets]);
  return [...wanted].filter((e) => !isNever(e) && statOrNull(join(etc, e)) !== null).sort();
}

/** Every file below the entries with its identity and time: what the copy depends on. */
function entriesFingerprint(entries: readonly string[], etc: string): string {
  const hash = createHash('sha256');
  // What the view adds of its own is part of what it is.
  hash.update(JSON.stringify(OWN_FILES));
  const visit = (rel: string): void => {
    const st = statOrNull(join(etc, rel));
    if (!st) return;
    hash.update(`${rel}\0${st.ino}:${st.size}:${st.mtimeMs}:${st.mode}\n`);
    if (st.isDirectory()) {
      let names: string[] = [];
      try {
        names = readdirSync(join(etc, rel)).sort();
      } catch {
        // Unreadable: its time stands for it.
      }
      for (const name of names) visit(join(rel, name));
    }
  };
  for (const e of entries) visit(e);
  return hash.digest('hex').slice(0, 16);
}

/** Copies one entry (a file, a symlink kept as it is, or a directory tree) as far as it can be read. */
function copyEntry(from: string, to: string): void {
  const st = statOrNull(from);
  if (!st) return;
  try {
    if (st.isSymbolicLink()) symlinkSync(readlinkSync(from), to);
    else if (st.isFile()) copyFileSync(from, to);
    else if (st.isDirectory()) {
      mkdirSync(to);
      for (const name of readdirSync(from)) copyEntry(join(from, name), join(to, name));
      chmodSync(to, st.mode & 0o7777);
    }
  } catch {
    // A file this user may not read stays out, as it would be unreadable inside too.
  }
}

/** True when a symlink at /etc/<entry> leads out of /etc and /usr (e.g. into /run): copied as its target's content. */
function leavesView(etc: string, entry: string): boolean {
  try {
    const real = realpathSync(join(etc, entry));
    return !['/etc/', '/usr/'].some((p) => real.startsWith(p));
  } catch {
    return false;
  }
}

/** Fills `dir` with the base view's /etc: the entries copied, the view's own files, mount points. */
export function fillBaseEtc(dir: string, entries: readonly string[], etc = '/etc'): void {
  for (const entry of entries) {
    mkdirSync(join(dir, dirname(entry)), { recursive: true, mode: 0o755 });
    const isLink = statOrNull(join(etc, entry))?.isSymbolicLink() === true;
    if (isLink && !entry.includes('/') && leavesView(etc, entry)) copyFileSafe(join(etc, entry), join(dir, entry));
    else copyEntry(join(etc, entry), join(dir, entry));
  }
  for (const [name, text] of Object.entries(OWN_FILES)) writeFileSync(join(dir, name), text, { mode: 0o644 });
  symlinkSync('/proc/self/mounts', join(dir, 'mtab'));
}

function copyFileSafe(from: string, to: string): void {
  try {
    copyFileSync(from, to);
  } catch {
    // Dangling or unreadable: left out.
  }
}

/** Prepares (once per state of the host's entries) the base view's /etc in `cacheDir`; returns its host path. */
export function prepareBaseEtc(cacheDir: string): string {
  const entries = baseEtcEntries(cachedUsrTargets(cacheDir));
  const key = entriesFingerprint(entries, '/etc');
  return cachedDir(join(cacheDir, 'base-etc'), key, (dir) => fillBaseEtc(dir, entries));
}
