// Which host directories may become a workspace (host/providers/workspace-policy.ts): the person's
// --workspace-allow (or its variable) read into real paths, and create_sandbox's `workspace`
// resolved — symlinks and `..` followed — before it is checked. Real directories and links.
import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../host/config/config.js';
import { isProviderError, type ProviderError } from '../../host/providers/provider-error.js';
import { isWithin, resolveAllowedRoots, resolveWorkspaceArg } from '../../host/providers/workspace-policy.js';

const top = realpathSync(mkdtempSync(join(tmpdir(), 'ws-policy-')));
const allowed = join(top, 'projects');
const outside = join(top, 'secret');
mkdirSync(join(allowed, 'app', 'src'), { recursive: true });
mkdirSync(join(allowed, 'projects-not'), { recursive: true });
mkdirSync(outside, { recursive: true });
mkdirSync(join(top, 'projects-sibling'), { recursive: true });
writeFileSync(join(allowed, 'file.txt'), 'x');
// A link inside the permitted tree that leads out of it, and one outside that leads in.
symlinkSync(outside, join(allowed, 'escape'));
symlinkSync(join(allowed, 'app'), join(top, 'link-in'));
afterAll(() => rmSync(top, { recursive: true, force: true }));

function refusal(path: string, roots: string[]): ProviderError {
  try {
    resolveWorkspaceArg(path, roots);
  } catch (e) {
    if (isProviderError(e)) return e;
    throw e;
  }
  throw new Error('not refused');
}

describe('the permitted set', () => {
  it('resolves each directory to its real path, once', () => {
    expect(resolveAllowedRoots([allowed, join(top, 'link-in'), join(allowed, 'app', '..')])).toEqual({
      roots: [allowed, join(allowed, 'app')],
    });
  });

  it('names the first item that is not an absolute path of an existing directory', () => {
    expect(resolveAllowedRoots([allowed, 'relative/dir'])).toEqual({ invalidIndex: 1, problem: 'not_absolute' });
    expect(resolveAllowedRoots([join(top, 'missing')])).toEqual({ invalidIndex: 0, problem: 'not_a_directory' });
    expect(resolveAllowedRoots([join(allowed, 'file.txt')])).toEqual({ invalidIndex: 0, problem: 'not_a_directory' });
  });

  it('comes from --workspace-allow (repeated or comma-separated), else SANDBOX_MCP_WORKSPACE_ALLOW; none by default', () => {
    expect(loadConfig({}).workspaceAllow).toEqual([]);
    expect(loadConfig({ SANDBOX_MCP_WORKSPACE_ALLOW: `${allowed}, ${outside}` }).workspaceAllow).toEqual([allowed, outside]);
    const flags = { workspaceAllow: [`${outside},${allowed}`, join(top, 'link-in')] };
    expect(loadConfig({ SANDBOX_MCP_WORKSPACE_ALLOW: '/nonexistent' }, flags).workspaceAllow).toEqual([
      outside,
      allowed,
      join(allowed, 'app'),
    ]);
  });

  it('refuses to start on an item that cannot be permitted, naming the flag or variable and the item, not its text', () => {
    expect(() => loadConfig({}, { workspaceAllow: [`${allowed},rel`] })).toThrow(
      new ConfigError('--workspace-allow: item 2 is not an absolute path'),
    );
    expect(() => loadConfig({ SANDBOX_MCP_WORKSPACE_ALLOW: join(top, 'nope') })).toThrow(
      new ConfigError('SANDBOX_MCP_WORKSPACE_ALLOW: item 1 is not an existing directory'),
    );
  });
});

describe("create_sandbox's workspace", () => {
  const roots = [allowed];

  it('is a permitted directory or one below it, as its real path', () => {
    expect(resolveWorkspaceArg(allowed, roots)).toBe(allowed);
    expect(resolveWorkspaceArg(join(allowed, 'app', 'src'), roots)).toBe(join(allowed, 'app', 'src'));
    expect(resolveWorkspaceArg(join(allowed, 'app', 'src', '..', '..'), roots)).toBe(allowed);
    // A link from outside into the permitted tree names a permitted directory.
    expect(resolveWorkspaceArg(join(top, 'link-in'), roots)).toBe(join(allowed, 'app'));
  });

  it('is refused without --workspace-allow, with a text naming the flag', () => {
    const e = refusal(allowed, []);
    expect(e.category).toBe('permission_denied');
    expect(e.code).toBe('workspaces_not_allowed');
    expect(e.suggestion).toContain('--workspace-allow');
    expect(e.suggestion).toContain('SANDBOX_MCP_WORKSPACE_ALLOW');
  });

  it('is refused outside the permitted directories, also through a symlink or `..`, without echoing the path', () => {
    for (const path of [
      outside,
      join(allowed, 'escape'),
      join(allowed, '..', 'secret'),
      join(allowed, '..'),
      join(top, 'projects-sibling'),
      '/',
    ]) {
      const e = refusal(path, roots);
      expect(e.category).toBe('permission_denied');
      expect(e.code).toBe('workspace_not_allowed');
      expect(e.suggestion).toContain('field `workspace`');
      expect(e.suggestion).not.toContain(top);
    }
  });

  it('must be an absolute path of an existing directory (invalid_argument naming the field)', () => {
    for (const [path, code] of [
      ['projects', 'workspace_not_absolute'],
      [`${allowed}\0x`, 'workspace_not_absolute'],
      [join(allowed, 'missing'), 'workspace_not_found'],
      [join(allowed, 'file.txt'), 'workspace_not_found'],
    ] as const) {
      const e = refusal(path, roots);
      expect([e.category, e.code]).toEqual(['invalid_argument', code]);
      expect(e.suggestion).toContain('field `workspace`');
      expect(e.suggestion).not.toContain(top);
    }
  });

  it('treats a name that only starts like a permitted directory as outside it', () => {
    expect(isWithin(join(top, 'projects-sibling'), allowed)).toBe(false);
    expect(isWithin(join(allowed, 'projects-not'), allowed)).toBe(true);
    expect(isWithin('/anything', '/')).toBe(true);
  });
});
