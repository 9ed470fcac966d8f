// HTTP bearer tokens: the one plain SANDBOX_MCP_TOKEN (the operator), or a tokens file of named
// principals. The file holds only SHA-256 hashes of the tokens (`sandbox-mcp token-hash` makes
// one), one principal per line:
//
//   # name   role    hash
//   alice    user    sha256:<64 hex>
//   ops      admin   sha256:<64 hex>
//
// A file that others may read or write, or that another user owns, is refused: whoever can change
// it can grant themselves admin. Tokens are compared in constant time and never logged; errors
// name the line, never its content.
import { hash, timingSafeEqual } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { ConfigError } from '../config/config.js';
import { OPERATOR, PRINCIPAL_NAME_PATTERN, ROLES, type Principal, type Role } from './principal.js';

/** A shorter bearer token is too easy to guess. */
export const MIN_TOKEN_CHARS = 16;

const HASH_PATTERN = /^sha256:([0-9a-f]{64})$/;

/** One line of a tokens file. */
export interface TokenEntry {
  name: string;
  role: Role;
  /** SHA-256 of the token. */
  hash: Buffer;
}

function sha256(token: string): Buffer {
  return hash('sha256', token, 'buffer');
}

/**
 * What an `Authorization: Bearer` header can carry whole: visible ASCII, no spaces. A token with a
 * space never matches the header's `Bearer <token>` form, and one beyond ASCII reaches the server
 * as other bytes (Node reads header bytes as Latin-1): either could never sign in.
 */
const TOKEN_CHARS_PATTERN = /^[\x21-\x7e]+$/;

/** Why `token` cannot be a bearer token (the subject names where it came from), or undefined. Never quotes it. */
function tokenProblem(token: string, subject: string): string | undefined {
  if (token.length < MIN_TOKEN_CHARS) return `${subject} must be at least ${MIN_TOKEN_CHARS} characters`;
  if (!TOKEN_CHARS_PATTERN.test(token))
    return `${subject} must be visible ASCII without spaces (an Authorization: Bearer header carries nothing else)`;
  return undefined;
}

/** The hash a tokens file holds for `token`: `sha256:<hex>`. Throws ConfigError for a token no client could send, or too short to be safe. */
export function hashToken(token: string): string {
  const problem = tokenProblem(token, 'a token');
  if (problem) throw new ConfigError(problem);
  return `sha256:${sha256(token).toString('hex')}`;
}

/** Parses a tokens file's text; throws ConfigError naming the first bad line (never its content). */
export function parseTokensFile(text: string): TokenEntry[] {
  const entries: TokenEntry[] = [];
  const lines = text.split('\n');
  for (const [index, raw] of lines.entries()) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const where = `tokens file line ${index + 1}`;
    const fields = line.split(/\s+/);
    if (fields.length !== 3) throw new ConfigError(`${where}: expected three fields: name, role, hash`);
    const [name, role, hash] = fields as [string, string, string];
    if (!PRINCIPAL_NAME_PATTERN.test(name))
      throw new ConfigError(`${where}: the name must be 1-64 of [A-Za-z0-9_.-], starting alphanumeric`);
    if (!(ROLES as readonly string[]).includes(role)) throw new ConfigError(`${where}: the role must be one of: ${ROLES.join(', ')}`);
    const hex = HASH_PATTERN.exec(hash)?.[1];
    if (!hex) throw new ConfigError(`${where}: the hash must be sha256:<64 lowercase hex> (make one with \`sandbox-mcp token-hash\`)`);
    if (entries.some((e) => e.name === name)) throw new ConfigError(`${where}: the name is used on an earlier line`);
    if (entries.some((e) => e.hash.toString('hex') === hex)) throw new ConfigError(`${where}: the same token is given on an earlier line`);
    entries.push({ name, role: role as Role, hash: Buffer.from(hex, 'hex') });
  }
  if (entries.length === 0) throw new ConfigError('the tokens file names no principal');
  return entries;
}

/** Reads a tokens file, refusing one another user owns or that group or others may read or write. */
export function loadTokensFile(path: string, uid = process.getuid?.()): TokenEntry[] {
  let stats;
  try {
    stats = statSync(path);
  } catch {
    throw new ConfigError('the tokens file cannot be read (check --tokens-file / SANDBOX_MCP_TOKENS_FILE)');
  }
  if (!stats.isFile()) throw new ConfigError('the tokens file is not a regular file');
  if (uid !== undefined && stats.uid !== uid) throw new ConfigError("the tokens file must be owned by the server's user");
  if ((stats.mode & 0o066) !== 0) throw new ConfigError('the tokens file must not be readable or writable by group or others (chmod 600)');
  return parseTokensFile(readFileSync(path, 'utf8'));
}

/** Maps a presented bearer token to its principal. */
export class TokenTable {
  private constructor(private readonly entries: readonly { hash: Buffer; principal: Principal }[]) {}

  /** One plain token that authenticates the operator (the single-user server). */
  static single(token: string): TokenTable {
    return new TokenTable([{ hash: sha256(token), principal: OPERATOR }]);
  }

  /** The named principals of a tokens file. */
  static named(entries: readonly TokenEntry[]): TokenTable {
    return new TokenTable(entries.map((e) => ({ hash: e.hash, principal: { kind: 'named', name: e.name, role: e.role } })));
  }

  /**
   * The principal `token` authenticates, or undefined. Every entry is compared, in constant time
   * (hashes have one length, so neither a token's length nor its position in the file leaks).
   */
  authenticate(token: string): Principal | undefined {
    const presented = sha256(token);
    let found: Principal | undefined;
    for (const entry of this.entries) if (timingSafeEqual(presented, entry.hash) && !found) found = entry.principal;
    return found;
  }
}

/** The HTTP server's tokens, and a generated token to show once when none was configured. */
export interface HttpTokens {
  tokens: TokenTable;
  /** How many named principals a tokens file gave (0: the single-user operator token). */
  principals: number;
  /** Set when no token was configured: print it once, never log it. */
  generated?: string;
}

/**
 * The tokens file (`tokensFileFlag`, else SANDBOX_MCP_TOKENS_FILE), else SANDBOX_MCP_TOKEN, else
 * a generated token. Giving both a file and a plain token is refused: which one wins would be a guess.
 */
export function httpTokensFrom(env: NodeJS.ProcessEnv, tokensFileFlag: string | undefined, generate: () => string): HttpTokens {
  const file = tokensFileFlag ?? (env.SANDBOX_MCP_TOKENS_FILE || undefined);
  const plain = env.SANDBOX_MCP_TOKEN;
  if (file !== undefined) {
    if (plain) throw new ConfigError('give either a tokens file or SANDBOX_MCP_TOKEN, not both');
    const entries = loadTokensFile(file);
    return { tokens: TokenTable.named(entries), principals: entries.length };
  }
  const problem = plain === undefined ? undefined : tokenProblem(plain, 'SANDBOX_MCP_TOKEN');
  if (problem) throw new ConfigError(problem);
  if (plain) return { tokens: TokenTable.single(plain), principals: 0 };
  const generated = generate();
  return { tokens: TokenTable.single(generated), principals: 0, generated };
}

/** Reads a token from stdin (to EOF, one trailing newline dropped): never from argv, which `ps` shows. */
export async function readTokenFromStdin(stdin: NodeJS.ReadableStream = process.stdin): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stdin) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk));
  return Buffer.concat(chunks)
    .toString('utf8')
    .replace(/\r?\n$/, '');
}
