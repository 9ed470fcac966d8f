// The agent's runtime as the host makes it (see shared/agent-runtime.ts for what it is inside): the
// server's node, the dynamic loader named in node's ELF header and the libraries that loader finds
// for it, hard-linked (copied where a link is refused) into one directory of the cache, keyed by what
// they are, so a node upgrade makes a new one and sandboxes already running keep theirs. One
// directory, bound once: a bind per file cost about 1 ms of bubblewrap's time each (measured).
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { chmodSync, closeSync, copyFileSync, linkSync, mkdirSync, openSync, readSync, realpathSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { AGENT_RUNTIME_LIB, AGENT_RUNTIME_LOADER, AGENT_RUNTIME_NODE } from '../../../../shared/agent-runtime.js';
import { cachedDir } from './cache-dir.js';

/** The program interpreter (PT_INTERP) of a 64-bit little-endian ELF executable; null when it has none. */
export function elfInterpreter(file: string): string | null {
  const fd = openSync(file, 'r');
  try {
    const header = Buffer.alloc(64);
    readSync(fd, header, 0, 64, 0);
    if (header.readUInt32BE(0) !== 0x7f454c46 || header[4] !== 2 || header[5] !== 1) return null;
    const phoff = Number(header.readBigUInt64LE(32));
    const phentsize = header.readUInt16LE(54);
    const phnum = header.readUInt16LE(56);
    const table = Buffer.alloc(phentsize * phnum);
    readSync(fd, table, 0, table.length, phoff);
    for (let i = 0; i < phnum; i++) {
      const entry = table.subarray(i * phentsize);
      if (entry.readUInt32LE(0) !== 3) continue; // PT_INTERP
      const offset = Number(entry.readBigUInt64LE(8));
      const size = Number(entry.readBigUInt64LE(32));
      const path = Buffer.alloc(size);
      readSync(fd, path, 0, size, offset);
      return path.toString('utf8').replace(/\0.*$/s, '');
    }
    return null;
  } finally {
    closeSync(fd);
  }
}

/** The libraries `loader` maps for `program` (`ld.so --list`), by soname: their host paths. */
export function linkedLibraries(loader: string, program: string): Map<string, string> {
  const out = execFileSync(loader, ['--list', program], { encoding: 'utf8', env: {}, timeout: 10_000 });
  const libs = new Map<string, string>();
  for (const m of out.matchAll(/^\s*(\S+) => (\/\S+) \(0x[0-9a-f]+\)$/gm)) libs.set(m[1]!, m[2]!);
  return libs;
}

/** One file of the runtime: its name there and the host file it is. */
interface RuntimeEntry {
  name: string;
  source: string;
}

/** What the runtime of `nodePath` is made of (node, its loader, its libraries), as real host paths. */
export function runtimeEntries(nodePath: string): RuntimeEntry[] {
  const node = realpathSync(nodePath);
  const loader = elfInterpreter(node);
  if (loader === null) throw new Error('node has no program interpreter');
  const entries: RuntimeEntry[] = [
    { name: AGENT_RUNTIME_LOADER, source: realpathSync(loader) },
    { name: AGENT_RUNTIME_NODE, source: node },
  ];
  for (const [soname, path] of linkedLibraries(loader, node))
    entries.push({ name: join(AGENT_RUNTIME_LIB, soname), source: realpathSync(path) });
  return entries;
}

/** The runtime directory of `nodePath` in `cacheDir`, made on first use; returns its host path. */
export function agentRuntimeDirFor(cacheDir: string, nodePath: string): string {
  const entries = runtimeEntries(nodePath);
  const hash = createHash('sha256');
  for (const e of entries) {
    const st = statSync(e.source);
    hash.update(`${e.name}\0${e.source}\0${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}\n`);
  }
  return cachedDir(join(cacheDir, 'runtime'), hash.digest('hex').slice(0, 16), (dir) => {
    for (const sub of new Set(entries.map((e) => dirname(e.name)))) {
      mkdirSync(join(dir, sub), { recursive: true });
      chmodSync(join(dir, sub), 0o755);
    }
    for (const e of entries) {
      try {
        linkSync(e.source, join(dir, e.name));
      } catch {
        // Another file system, or a file we may not link (protected_hardlinks): a copy.
        copyFileSync(e.source, join(dir, e.name));
      }
    }
  });
}
