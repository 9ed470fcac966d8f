// The ids an image's config `User` names (`name`, `uid`, `name:group`, `uid:gid`…), read from the
// applied root's /etc/passwd and /etc/group as a container runtime reads them. The root is the
// image's: every name on the way is opened beneath it without following a link (util/beneath.ts),
// so a layer's `etc -> /etc` never makes the host's own files answer.
import { closeSync } from 'node:fs';
import { BeneathDir, BeneathError } from '../../../../util/beneath.js';
import { readUpTo } from '../../../../util/read-up-to.js';

/** A user's ids inside a template. */
export interface ImageUserIds {
  uid: number;
  gid: number;
  /** Its name in /etc/passwd (absent: a number the root does not list); USER and LOGNAME of its commands. */
  name?: string | undefined;
  /** Its home in /etc/passwd, or `/` for a number the root does not list (as a container runtime sets HOME). */
  home?: string | undefined;
  /** True when `home` is a real directory in the root (no link on the way): then the default cwd of its commands. */
  home_is_dir?: boolean | undefined;
}

/** At most this much of /etc/passwd or /etc/group is read: an image's files are untrusted. */
export const MAX_ACCOUNTS_BYTES = 1 << 20;
const NUMERIC = /^[0-9]{1,10}$/;

/** What resolving a User reads of an image's root, never through a link: a tree on disk, or a stack of layers' merged view (images/layer-stack.ts). */
export interface ImageRootReader {
  /** etc/`name` (passwd, group) as text (at most MAX_ACCOUNTS_BYTES): '' when there is none or a link is on the way. */
  readEtc(name: 'passwd' | 'group'): string;
  /** True when absolute `path` is a real directory, with no link on the way. */
  isDir(path: string): boolean;
}

/** The reader of the tree at `root` (each name opened beneath it, util/beneath.ts). */
export function treeReader(root: string): ImageRootReader {
  return { readEtc: (name) => readEtcFile(root, name), isDir: (path) => isDirBeneath(root, path) };
}

/** The regular file etc/`name` under `root` as text (at most MAX_ACCOUNTS_BYTES), or '' when there is none or a link is on the way. */
function readEtcFile(root: string, name: string): string {
  try {
    return BeneathDir.openRoot(root).use((top) =>
      top.openPath('etc').use((etc) => {
        const { fd } = etc.openFile(name);
        try {
          return readUpTo(fd, MAX_ACCOUNTS_BYTES).toString('utf8');
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
 * The ids `user` (an OCI config's `User`) names in the image `image` reads: '' is root; a
 * number stands for itself (its group from passwd when listed there, else 0); a name must be in
 * /etc/passwd, a group name in /etc/group. Null when it names a user or group the root does not have.
 */
export function resolveImageUser(image: ImageRootReader, user: string): ImageUserIds | null {
  if (user === '') return { uid: 0, gid: 0 };
  const [userPart = '', groupPart, ...extra] = user.split(':');
  if (extra.length > 0 || userPart === '') return null;
  const passwd = accountLines(image.readEtc('passwd'));
  const entry = NUMERIC.test(userPart) ? passwd.find((f) => f[2] === userPart) : passwd.find((f) => f[0] === userPart);
  const uid = NUMERIC.test(userPart) ? asId(userPart) : asId(entry?.[2]);
  if (uid === null) return null;
  let gid: number | null;
  if (groupPart === undefined) gid = entry ? asId(entry[3]) : 0;
  else if (NUMERIC.test(groupPart)) gid = asId(groupPart);
  else gid = asId(accountLines(image.readEtc('group')).find((f) => f[0] === groupPart)?.[2]);
  if (gid === null) return null;
  if (uid === 0) return { uid, gid };
  const home = entry?.[5]?.startsWith('/') ? entry[5] : '/';
  return { uid, gid, ...(entry ? { name: entry[0]! } : {}), home, home_is_dir: image.isDir(home) };
}

/** True when absolute `path` is a real directory in the tree at `root`, with no link on the way (none is followed). */
function isDirBeneath(root: string, path: string): boolean {
  try {
    return BeneathDir.openRoot(root).use((top) => (path === '/' ? true : top.openPath(path.slice(1)).use(() => true)));
  } catch (err) {
    if (err instanceof BeneathError) return false;
    throw err;
  }
}

/** The highest id a template sandbox maps inside (a root server's block of 65536: docs/local-provider.md). */
const MAX_MAPPED_ID = 65535;

/**
 * Whose ids a sandbox on an image template runs its commands as: `user` (the image's user, ids
 * the sandbox maps), or root inside with a `note` saying why the image's `User` is not honoured
 * (null: the image names root, or no image). `owners` is the template's (store.ts): `flattened`
 * is a server that is not root, whose sandboxes map one id, so no other user can exist there.
 */
export function imageUserPlan(
  image: { config: { user: string }; user_ids?: ImageUserIds | null | undefined } | undefined,
  owners: 'native' | 'flattened',
): { user: ImageUserIds } | { note: string } | null {
  if (!image || image.config.user === '') return null;
  const ids = image.user_ids;
  if (ids === undefined || ids === null) {
    return { note: "The image's User names no user or group its root has (/etc/passwd, /etc/group): commands run as root inside." };
  }
  if (ids.uid === 0) return null;
  if (owners !== 'native') {
    return {
      note:
        `The image's User (uid ${ids.uid}) cannot exist in a sandbox of a server that is not root: it maps one id, root inside. ` +
        'Commands run as root inside.',
    };
  }
  if (ids.uid > MAX_MAPPED_ID || ids.gid > MAX_MAPPED_ID) {
    return {
      note: `The image's User (uid ${ids.uid}, gid ${ids.gid}) is beyond the ids a sandbox maps (0-65535): commands run as root inside.`,
    };
  }
  return { user: ids };
}
