// The local provider's perl helpers (helpers/*.pl, copied to dist/helpers/ by the build): the launch of
// a template sandbox's writable root (mount-root), the entry into a template sandbox that drops
// capabilities before anything of the sandbox's runs (enter), the per-sandbox limit on user
// namespaces (userns-off), and a snapshot's extended attributes and special files (copy-meta). perl
// because these need system calls node has no binding for (setns, open_tree, mount_setattr,
// flistxattr, mknodat…) and perl-base is on every Debian-like system; raw system call numbers
// because perl's syscall() is all it has without modules (loading any costs as much as the script).
// Run as `perl -e <text> -- <args>`: the host reads the text, so a helper runs whichever uid runs it
// (a template sandbox's commands enter as a uid that cannot read a checkout under /root).
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** The helpers, by file name without `.pl`. */
export type PerlHelper = 'mount-root' | 'enter' | 'userns-off' | 'copy-meta';

/** The system calls the helpers make, by name, for each architecture they were written for. */
export const SYSCALL_NUMBERS = {
  x64: {
    close: 3,
    dup3: 292,
    fcntl: 72,
    fgetxattr: 193,
    flistxattr: 196,
    lsetxattr: 189,
    mknodat: 259,
    mount: 165,
    move_mount: 429,
    mount_setattr: 442,
    open_tree: 428,
    prctl: 157,
    setgroups: 116,
    setns: 308,
    setresgid: 119,
    setresuid: 117,
    unshare: 272,
  },
  // The generic table (asm-generic/unistd.h); not run on an aarch64 machine yet.
  arm64: {
    close: 57,
    dup3: 24,
    fcntl: 25,
    fgetxattr: 10,
    flistxattr: 13,
    lsetxattr: 6,
    mknodat: 33,
    mount: 40,
    move_mount: 429,
    mount_setattr: 442,
    open_tree: 428,
    prctl: 167,
    setgroups: 159,
    setns: 268,
    setresgid: 149,
    setresuid: 147,
    unshare: 97,
  },
} as const satisfies Record<string, Record<string, number>>;

/** True for an architecture (node's process.arch) whose system call numbers the helpers know. */
export function isHelperArch(arch: string): arch is keyof typeof SYSCALL_NUMBERS {
  return Object.hasOwn(SYSCALL_NUMBERS, arch);
}

/** Where the helpers of a build are: `helpers/` beside its keeper script. */
export function helpersDir(keeperScript: string): string {
  return join(dirname(keeperScript), 'helpers');
}

const texts = new Map<string, string>();

/** The text of a helper (read once per process); throws when the build has none. */
export function readHelper(dir: string, name: PerlHelper): string {
  const file = join(dir, `${name}.pl`);
  let text = texts.get(file);
  if (text === undefined) {
    text = readFileSync(file, 'utf8');
    texts.set(file, text);
  }
  return text;
}

/** The command that runs a helper's `text` with `args` on `arch` (one of SYSCALL_NUMBERS). Pure. */
export function perlCommand(
  perl: string,
  text: string,
  arch: keyof typeof SYSCALL_NUMBERS,
  args: readonly string[],
): { file: string; args: string[] } {
  const table = Object.entries(SYSCALL_NUMBERS[arch])
    .map(([name, nr]) => `${name} => ${nr}`)
    .join(', ');
  return { file: perl, args: ['-e', `my %SYS = (${table});\n${text}`, '--', ...args] };
}
