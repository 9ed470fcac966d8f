// The ids an image's config `User` names (`name`, `uid`, `name:group`, `uid:gid`…), read from the
// applied root's /etc/passwd and /etc/group as a container runtime reads them. The root is the
// image's: every name on the way is opened beneath it without following a link (util/beneath.ts),
// so a layer's `etc -> /etc` never makes the host's own files answer.
import { closeSync, readSync } from 'node:fs';
import { BeneathDir, BeneathError } from '../../../../util/beneath.js';

/** A user's ids inside a template. */
export interface ImageUserIds {
  uid: number;
  gid: number;
}

/** At most this much of /etc/passwd or /etc/group is read: an image's files are untrusted. */
export const MAX_ACCOUNTS_BYTES = 1 << 20;
const NUMERIC = /^[0-9]{1,10}$/;

/** Reads the image's etc/`name` (passwd, group) as text: '' when there is none or a link is on the way. */
export type EtcReader = (name: 'passwd' | 'group') => string;

/** The regular file etc/`name` under `root` as text (at most MAX_ACCOUNTS_BYTES), or '' when there is none or a link is on the way. */
function readEtcFile(root: string, name: string): string {
  try {
    return BeneathDir.openRoot(root).use((top) =>
      top.openPath('etc').use((etc) => {
        const { fd } = etc.openFile(name);
        try {
          const buf = Buffer.alloc(MAX_ACCOUNTS_BYTES);
          let length = 0;
          for (let n = 1; n > 0 && length < buf.length; length += n) n = readSync(fd, buf, length, buf.length - length, null);
          return buf.subarray(0, length).toString('utf8');
        } finally {
          closeSync(fd);
        }
      }),
    );
  } catch (err) {
    if (err instanceof BeneathError) return '';
    throw err;
  }
}

/** The colon-separated fields of each line of an accounts file. */
function accountLines(text: string): string[][] {
  return text
    .split('\n')
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((l) => l.split(':'));
}

function asId(text: string | undefined): number | null {
  if (text === undefined || !NUMERIC.test(text)) return null;
  const id = Number(text);
  return id <= 0xffffffff ? id : null;
}

/**
 * The ids `user` (an OCI config's `User`) names in the image applied at `root`: '' is root; a
 * number stands for itself (its group from passwd when listed there, else 0); a name must be in
 * /etc/passwd, a group name in /etc/group. Null when it names a user or group the root does not have.
 */
export function resolveImageUser(root: string | EtcReader, user: string): ImageUserIds | null {
  if (user === '') return { uid: 0, gid: 0 };
  // A root, or a reader of a stack of layers' merged view (images/layer-stack.ts).
  const readEtc: EtcReader = typeof root === 'string' ? (name) => readEtcFile(root, name) : root;
  const [userPart = '', groupPart, ...extra] = user.split(':');
  if (extra.length > 0 || userPart === '') return null;
  const passwd = accountLines(readEtc('passwd'));
  const entry = NUMERIC.test(userPart) ? passwd.find((f) => f[2] === userPart) : passwd.find((f) => f[0] === userPart);
  const uid = NUMERIC.test(userPart) ? asId(userPart) : asId(entry?.[2]);
  if (uid === null) return null;
  let gid: number | null;
  if (groupPart === undefined) gid = entry ? asId(entry[3]) : 0;
  else if (NUMERIC.test(groupPart)) gid = asId(groupPart);
  else gid = asId(accountLines(readEtc('group')).find((f) => f[0] === groupPart)?.[2]);
  return gid === null ? null : { uid, gid };
}
