// Real directories and git repositories for the workspace tests, and a hash of a whole tree —
// every file's bytes, every mode, every link target, .git included — to prove a host directory
// byte-for-byte unchanged.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Runs git in `cwd` with a fixed identity and returns its trimmed stdout. */
export function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', ['-c', 'user.name=Test Person', '-c', 'user.email=person@example.test', ...args], {
    cwd,
    encoding: 'utf8',
  }).trim();
}

/** A hash of everything in `dir`: names, types, modes, bytes and link targets (mtimes aside). */
export function treeHash(dir: string): string {
  const hash = createHash('sha256');
  const walk = (rel: string): void => {
    for (const name of readdirSync(join(dir, rel)).sort()) {
      const path = join(rel, name);
      const st = lstatSync(join(dir, path));
      hash.update(`${path}\0${st.mode}\0`);
      if (st.isSymbolicLink()) hash.update(readlinkSync(join(dir, path)));
      else if (st.isDirectory()) walk(path);
      else if (st.isFile()) hash.update(readFileSync(join(dir, path)));
      hash.update('\0');
    }
  };
  walk('');
  return hash.digest('hex');
}

/** The project the tests hand a sandbox: text, a script, a binary, nested files, a link. */
export function writeProject(dir: string): void {
  mkdirSync(join(dir, 'src', 'lib'), { recursive: true });
  writeFileSync(join(dir, 'README.md'), '# Project\n\nA project to work on.\n');
  writeFileSync(join(dir, 'src', 'app.js'), "console.log('hello');\n");
  writeFileSync(join(dir, 'src', 'lib', 'util.js'), 'export const one = 1;\n');
  writeFileSync(join(dir, 'obsolete.txt'), 'remove me\n');
  writeFileSync(join(dir, 'run.sh'), '#!/bin/sh\necho run\n');
  chmodSync(join(dir, 'run.sh'), 0o644);
  writeFileSync(join(dir, 'logo.bin'), Buffer.from([0, 1, 2, 3, 255, 254]));
  writeFileSync(join(dir, '.gitignore'), 'build/\n');
}

/** A git repository holding writeProject's files, committed on `main`; returns HEAD. */
export function makeRepo(dir: string): string {
  mkdirSync(dir, { recursive: true });
  writeProject(dir);
  git(dir, 'init', '-q', '-b', 'main');
  git(dir, 'add', '.');
  git(dir, 'commit', '-qm', 'initial');
  return git(dir, 'rev-parse', 'HEAD');
}

/** What a sandbox does to writeProject's files: edits, adds (a build file git ignores too), deletes, makes executable. */
export const SANDBOX_EDITS = [
  'printf "console.log(\'hello, sandbox\');\\n" > src/app.js',
  'mkdir -p src/new build && printf "export const two = 2;\\n" > src/new/two.js && echo out > build/output.txt',
  'rm obsolete.txt',
  'chmod +x run.sh',
].join(' && ');

/** What workspace_changes lists after SANDBOX_EDITS, as `<change> <path>`, in its (path) order. */
export const SANDBOX_EDITS_CHANGES = [
  'added build',
  'added build/output.txt',
  'deleted obsolete.txt',
  'mode_changed run.sh',
  'modified src/app.js',
  'added src/new',
  'added src/new/two.js',
];
