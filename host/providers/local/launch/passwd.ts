// The sandbox's own /etc/passwd and /etc/group (bound in by bwrap from a pipe): its uid is named
// `user` with home /home/user, whatever uid it has on the host.
import { SANDBOX_HOME } from '../../provider.js';
import type { Identity } from './command-lines.js';

// Host ids the sandbox's user namespace does not map (root's files, for one) show as the overflow id.
const OVERFLOW_ID = 65534;

/** The sandbox's /etc/passwd: its uid is `user`, home /home/user; unmapped owners show as `nobody`. */
export function passwdFile(id: Identity, shell: string): string {
  const nobody = id.uid === OVERFLOW_ID ? '' : `nobody:x:${OVERFLOW_ID}:${OVERFLOW_ID}:nobody:/nonexistent:/usr/sbin/nologin\n`;
  return `root:x:0:0:root:/root:/bin/sh\nuser:x:${id.uid}:${id.gid}:user:${SANDBOX_HOME}:${shell}\n${nobody}`;
}

/** The sandbox's /etc/group. */
export function groupFile(id: Identity): string {
  const nogroup = id.gid === OVERFLOW_ID ? '' : `nogroup:x:${OVERFLOW_ID}:\n`;
  return `root:x:0:\nuser:x:${id.gid}:\n${nogroup}`;
}
