// The dashboard in a real browser (Debian's chromium through playwright-core) against the built
// `sandbox-mcp http` with a tokens file (alice and bob are users, root an admin) and real local
// sandboxes made through MCP: sign-in, what each principal sees, live output, cancel and kill,
// and the refusals (no session, a foreign Origin, another page of this host, a wrong Host);
// then `sandbox-mcp dashboard` on the same state directory with its one-time link.
// Screenshots of the main views go to test-artifacts/screenshots/ (git-ignored).
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashToken } from '../../host/access/tokens-file.js';
import { OverviewSchema } from '../../host/dashboard/overview.js';
import { launchBrowser, requireChromium, screenshotPath } from '../support/browser.js';
import { type HttpServer, ok, serverEnv, startHttp, toolError } from '../support/built-server.js';
import { HOSTILE_COMMAND, HOSTILE_OUTPUT } from '../support/hostile-text.js';
import { HOST_JS } from '../support/paths.js';
import { requireSandboxes } from '../support/prerequisites.js';
import { destroyStateDir, tempStateDir } from '../support/state-dir.js';
import { waitFor } from '../support/wait.js';

const TOKENS = {
  alice: 'alice-token-0123456789abcdef',
  bob: 'bob-token-0123456789abcdefgh',
  root: 'root-token-0123456789abcdefg',
};
const SECRET = 'S3cretForTheDashboardXYZ';
/** Prints a line five times a second; once /tmp/go appears, one marker line (the fixture's readiness is its first ticks). */
const TICKER =
  `: the literal ${SECRET} is masked in the command too; ` +
  'echo "token is $MY_API_TOKEN"; i=0; while :; do i=$((i+1)); echo "tick $i"; ' +
  'if [ -f /tmp/go ]; then echo "MARKER after load"; rm -f /tmp/go; fi; sleep 0.2; done';

/** More than the 1 MiB a log keeps, then a last line that only the stream's kept end can show. */
const SPEW = 'head -c 1200000 /dev/zero | tr "\\0" a; echo THE-END';

const stateDir = tempStateDir();
const tokensDir = mkdtempSync(join(tmpdir(), 'sandbox-mcp-tokens-'));
const tokensFile = join(tokensDir, 'tokens');
/** A host directory alice's second sandbox has as its workspace. */
const workspaceDir = join(tokensDir, 'project');
let server: HttpServer;
let base: string;
let browser: Browser;
const mcp = {} as Record<'alice' | 'bob', Client>;
/** alice's two sandboxes (a1 with the ticker, a2 with a sleeper) and bob's one. */
const ids = { a1: '', a2: '', b1: '', ticker: '', sleeper: '' };
let serverLog = () => '';

beforeAll(async () => {
  requireSandboxes();
  requireChromium();
  writeFileSync(
    tokensFile,
    `alice user ${hashToken(TOKENS.alice)}\nbob user ${hashToken(TOKENS.bob)}\nroot admin ${hashToken(TOKENS.root)}\n`,
    { mode: 0o600 },
  );
  mkdirSync(workspaceDir);
  writeFileSync(join(workspaceDir, 'README.md'), '# A project\n');
  server = await startHttp({
    SANDBOX_MCP_STATE_DIR: stateDir,
    SANDBOX_MCP_TOKENS_FILE: tokensFile,
    SANDBOX_MCP_WORKSPACE_ALLOW: workspaceDir,
  });
  let log = '';
  server.process.stderr!.on('data', (d: Buffer) => (log += d.toString()));
  serverLog = () => log;
  base = new URL('/', server.url).href;
  mcp.alice = (await server.connect({ authorization: `Bearer ${TOKENS.alice}` })).client;
  mcp.bob = (await server.connect({ authorization: `Bearer ${TOKENS.bob}` })).client;
  ids.a1 = (await ok(mcp.alice, 'create_sandbox', { timeout: 900, envs: { MY_API_TOKEN: SECRET } })).sandbox_id;
  ids.a2 = (await ok(mcp.alice, 'create_sandbox', { timeout: 900, workspace: workspaceDir })).sandbox_id;
  ids.b1 = (await ok(mcp.bob, 'create_sandbox', { timeout: 900 })).sandbox_id;
  ids.ticker = (await ok(mcp.alice, 'start_task', { sandbox_id: ids.a1, command: TICKER, timeout: 900 })).task_id;
  ids.sleeper = (await ok(mcp.alice, 'start_task', { sandbox_id: ids.a2, command: 'echo ready; sleep 900', timeout: 900 })).task_id;
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await server?.stop();
  await destroyStateDir(stateDir);
  rmSync(tokensDir, { recursive: true, force: true });
});

/** A fresh browser context (its own cookies and storage) with a 1280×800 page, its errors collected. */
async function freshPage(viewport = { width: 1280, height: 800 }): Promise<{ context: BrowserContext; page: Page; errors: string[] }> {
  const context = await browser.newContext({ viewport });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => {
    // A refused request is logged by the browser as a failed resource: expected where the test asks for one.
    if (m.type() === 'error' && !/status of 40[13]/.test(m.text())) errors.push(m.text());
  });
  return { context, page, errors };
}

/** Signs in through the form. */
async function signIn(page: Page, token: string): Promise<void> {
  await page.goto(base);
  await page.locator('#token').fill(token);
  await page.locator('#signin button[type=submit]').click();
  await page.locator('#sandboxes tbody tr').first().waitFor();
}

/** The sandbox ids in the table, in order. */
async function rows(page: Page): Promise<string[]> {
  return page.locator('#sandboxes tbody tr').evaluateAll((trs) => trs.map((tr: any) => tr.dataset.sandbox as string));
}

/** A session opened from Node: the cookie and CSRF token a page would hold. */
async function apiSession(token: string): Promise<{ cookie: string; csrf: string }> {
  const res = await fetch(new URL('/api/session', base), {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin: new URL(base).origin },
    body: JSON.stringify({ token }),
  });
  expect(res.status).toBe(200);
  const cookie = res.headers.get('set-cookie')!.split(';')[0]!;
  return { cookie, csrf: ((await res.json()) as { csrf: string }).csrf };
}

/** A raw request (fetch cannot set Host). */
function rawGet(path: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  const url = new URL(path, base);
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, path: url.pathname, headers }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('the dashboard (sandbox-mcp http)', () => {
  it('without sign-in: the page shows only the sign-in form and the API gives no data; a wrong token is refused', async () => {
    const { context, page } = await freshPage();
    await page.goto(base);
    await page.locator('#signin').waitFor();
    expect(await page.locator('#app').isHidden()).toBe(true);
    for (const path of ['/api/sandboxes', '/api/me', `/api/sandboxes/${encodeURIComponent(ids.a1)}/tasks/${ids.ticker}/output`]) {
      const res = await page.request.get(new URL(path, base).href);
      expect(res.status(), path).toBe(401);
      expect(await res.text()).not.toContain(ids.a1);
    }
    await page.locator('#token').fill('not-a-token-of-this-server');
    await page.locator('#signin button[type=submit]').click();
    await expect.poll(() => page.locator('#signin-error').textContent()).toContain('not accepted');
    // The page's headers: a strict CSP, never framed.
    const res = await page.request.get(base);
    expect(res.headers()['content-security-policy']).toContain("script-src 'self'");
    expect(res.headers()['content-security-policy']).toContain("frame-ancestors 'none'");
    await page.screenshot({ path: screenshotPath('dashboard-signin') });
    await context.close();
  });

  it('a user sees exactly its own two sandboxes and its running task, and a line printed after the page loaded appears without a reload, masked as get_task masks it', async () => {
    const { context, page, errors } = await freshPage();
    await signIn(page, TOKENS.alice);
    expect((await rows(page)).sort()).toEqual([ids.a1, ids.a2].sort());
    expect(await page.locator('#who').textContent()).toBe('alice (user)');
    // The session cookie is HttpOnly and SameSite=Strict: the page's script cannot read it.
    const [cookie] = await context.cookies();
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Strict' });
    expect(await page.evaluate(() => (globalThis as any).document.cookie)).toBe('');

    await page.locator(`tr[data-sandbox="${ids.a1}"]`).click();
    const task = page.locator(`#tasks tr[data-task="${ids.ticker}"]`);
    await expect.poll(() => task.getAttribute('data-state')).toBe('running');
    // Each task names its command, cut to the column (the whole text on hover), masked as its output is.
    const masked = TICKER.replace(SECRET, '[MASKED]');
    const commandCell = task.locator('td[data-label="Command"] .cut');
    expect(await commandCell.textContent()).toBe(masked);
    expect(await commandCell.getAttribute('title')).toBe(masked);
    expect(await commandCell.evaluate((el: any) => el.scrollWidth > el.clientWidth)).toBe(true);
    // The sandboxes table names each one's workspace and template ('–': none).
    const a2 = page.locator(`tr[data-sandbox="${ids.a2}"]`);
    const workspaceCell = a2.locator('td[data-label="Workspace"] .cut');
    expect(await workspaceCell.textContent()).toBe('project');
    expect(await workspaceCell.getAttribute('title')).toBe(workspaceDir);
    expect(await a2.locator('td[data-label="Template"]').textContent()).toBe('base');
    expect(await page.locator(`tr[data-sandbox="${ids.a1}"] td[data-label="Workspace"]`).textContent()).toBe('–');
    await task.click();
    // Selected, the task's whole command stands above its output.
    expect(await page.locator('#output-command').textContent()).toBe(masked);
    await page.locator('#stdout').getByText('tick 3', { exact: false }).waitFor();
    const stdout = (await page.locator('#stdout').textContent())!;
    expect(stdout).toContain('token is [MASKED]');
    expect(stdout).not.toContain(SECRET);
    // Marks this document: a reload would lose the mark.
    await page.evaluate(() => ((globalThis as any).mark = 42));
    await ok(mcp.alice, 'write_file', { sandbox_id: ids.a1, path: '/tmp/go', content: 'x' });
    await page.locator('#stdout').getByText('MARKER after load').waitFor();
    expect(await page.evaluate(() => (globalThis as any).mark)).toBe(42);
    await page.screenshot({ path: screenshotPath('dashboard') });
    expect(errors).toEqual([]);
    await context.close();
  });

  it('a stream over the 1 MiB cap shows its first MiB, a marked gap, and its real end', async () => {
    const spew = await ok(mcp.alice, 'start_task', { sandbox_id: ids.a1, command: SPEW });
    await expect
      .poll(async () => (await ok(mcp.alice, 'get_task', { sandbox_id: ids.a1, task_id: spew.task_id, wait: 5 })).state, {
        timeout: 30_000,
      })
      .toBe('succeeded');
    const { context, page, errors } = await freshPage();
    await signIn(page, TOKENS.alice);
    await page.locator(`tr[data-sandbox="${ids.a1}"]`).click();
    await page.locator(`#tasks tr[data-task="${spew.task_id}"]`).click();
    await page.locator('#stdout').getByText('THE-END').waitFor({ timeout: 30_000 });
    const gap = page.locator('#stdout .gap');
    expect(await gap.textContent()).toContain('more than 1 MiB');
    expect(await gap.textContent()).toContain('not kept (how many is not known)');
    // The log's first MiB, the gap, then the end (the kept end is 32 KiB of it).
    const [head, tail] = await page.locator('#stdout').evaluate((pre: any) => {
      const gapEl = pre.querySelector('.gap');
      const text = (nodes: any[]) => nodes.map((n) => n.textContent).join('');
      const nodes = [...pre.childNodes];
      return [text(nodes.slice(0, nodes.indexOf(gapEl))), text(nodes.slice(nodes.indexOf(gapEl) + 1))];
    });
    expect(head).toBe('a'.repeat(1024 * 1024));
    expect(tail).toBe(`${'a'.repeat(32 * 1024 - 'THE-END\n'.length)}THE-END\n`);
    const size = (await page.locator('#stdout-size').textContent())!;
    expect(size).toContain("the stream's last 32 KiB are shown after the gap");
    expect(size).not.toContain('the rest was not kept');
    await page.screenshot({ path: screenshotPath('dashboard-tail-end') });
    await gap.evaluate((el: any) => el.scrollIntoView({ block: 'center' }));
    expect(await gap.isVisible()).toBe(true);
    await page.screenshot({ path: screenshotPath('dashboard-tail-gap') });
    expect(errors).toEqual([]);
    await context.close();
  });

  it('cancel, a new lifetime and kill, each after a confirmation, are done and shown', async () => {
    const { context, page, errors } = await freshPage();
    await signIn(page, TOKENS.alice);
    await page.locator(`tr[data-sandbox="${ids.a2}"]`).click();
    const task = page.locator(`#tasks tr[data-task="${ids.sleeper}"]`);
    await expect.poll(() => task.getAttribute('data-state')).toBe('running');
    await task.click();
    await page.locator('#stdout').getByText('ready').waitFor();

    // Keeping it changes nothing.
    await task.getByRole('button', { name: 'Cancel…' }).click();
    await page.locator('#confirm').getByRole('button', { name: 'Keep it' }).click();
    expect((await ok(mcp.alice, 'get_task', { sandbox_id: ids.a2, task_id: ids.sleeper })).state).toBe('running');
    await task.getByRole('button', { name: 'Cancel…' }).click();
    expect(await page.locator('#confirm-text').textContent()).toContain(ids.sleeper.slice(0, 8));
    await page.screenshot({ path: screenshotPath('dashboard-confirm') });
    await page.locator('#confirm-yes').click();
    await expect.poll(() => task.getAttribute('data-state'), { timeout: 15_000 }).toBe('cancelled');
    await expect.poll(() => page.locator('#output-state').getAttribute('data-state'), { timeout: 15_000 }).toBe('cancelled');
    expect((await ok(mcp.alice, 'get_task', { sandbox_id: ids.a2, task_id: ids.sleeper })).state).toBe('cancelled');

    // A new lifetime, counted from now, after the same kind of confirmation.
    await page.locator('#extend').click();
    await page.locator('#extend-seconds').fill('7200');
    await page.locator('#confirm-yes').click();
    await expect
      .poll(async () => Date.parse((await ok(mcp.alice, 'get_sandbox', { sandbox_id: ids.a2 })).end_at) - Date.now())
      .toBeGreaterThan(7000 * 1000);

    await page.locator('#kill').click();
    expect(await page.locator('#confirm-text').textContent()).toContain(ids.a2);
    await page.locator('#confirm-yes').click();
    await expect.poll(() => rows(page), { timeout: 15_000 }).toEqual([ids.a1]);
    expect((await toolError(mcp.alice, 'get_sandbox', { sandbox_id: ids.a2 })).category).toBe('not_found');
    expect(errors).toEqual([]);
    // What was done is logged by name, never with a credential.
    await waitFor(() => serverLog().includes('"action":"kill_sandbox"'), 'the kill in the log');
    await context.close();
  });

  it("an admin sees everyone's sandboxes with their owners; the narrow layout puts each row on a card", async () => {
    const { context, page } = await freshPage({ width: 640, height: 900 });
    await signIn(page, TOKENS.root);
    expect(await rows(page)).toEqual(expect.arrayContaining([ids.a1, ids.b1]));
    const owners = await page.locator('#sandboxes tbody td[data-label="Owner"]').allTextContents();
    expect(owners).toEqual(expect.arrayContaining(['alice', 'bob']));
    // Cards: each cell laid out as label | value, the header row out of sight (kept for screen readers).
    expect(
      await page
        .locator('#sandboxes tbody td')
        .first()
        .evaluate((td) => (globalThis as any).getComputedStyle(td).display),
    ).toBe('flex');
    expect(await page.locator('#sandboxes thead').evaluate((el) => (globalThis as any).getComputedStyle(el).position)).toBe('absolute');
    await page.screenshot({ path: screenshotPath('dashboard-narrow'), fullPage: true });
    await context.close();
  });

  it('refuses a foreign Origin, another page of this host, a wrong Host, and a cookie without its CSRF token', async () => {
    const session = await apiSession(TOKENS.alice);
    const own = new URL(base).origin;
    const get = (path: string, headers: Record<string, string>) => fetch(new URL(path, base), { headers });
    expect((await get('/api/sandboxes', { cookie: session.cookie, 'x-sandbox-mcp-csrf': session.csrf, origin: own })).status).toBe(200);
    const listed = OverviewSchema.parse(
      await (await get('/api/sandboxes', { cookie: session.cookie, 'x-sandbox-mcp-csrf': session.csrf })).json(),
    );
    const a1 = listed.sandboxes.find((s) => s.sandbox_id === ids.a1)!;
    expect(listed.sandboxes.map((s) => s.sandbox_id)).not.toContain(ids.b1);
    expect(a1.usage!.disk_bytes!.used).toBeGreaterThan(0);
    expect(a1.tasks!.map((t) => t.task_id)).toContain(ids.ticker);
    // The listing carries each task's command, masked: the secret typed into it never leaves the server.
    expect(a1.tasks!.find((t) => t.task_id === ids.ticker)).toMatchObject({
      command: TICKER.replace(SECRET, '[MASKED]'),
      command_truncated: false,
    });
    expect(JSON.stringify(listed)).not.toContain(SECRET);
    expect(a1.owner).toBeUndefined();
    // A foreign Origin, with a valid session: refused before anything runs.
    const foreign = { cookie: session.cookie, 'x-sandbox-mcp-csrf': session.csrf, origin: 'http://evil.example' };
    expect((await get('/api/sandboxes', foreign)).status).toBe(403);
    const kill = await fetch(new URL(`/api/sandboxes/${encodeURIComponent(ids.a1)}/kill`, base), { method: 'POST', headers: foreign });
    expect(kill.status).toBe(403);
    // A change without any Origin, too.
    const { origin: _none, ...noOrigin } = foreign;
    const kill2 = await fetch(new URL(`/api/sandboxes/${encodeURIComponent(ids.a1)}/kill`, base), { method: 'POST', headers: noOrigin });
    expect(kill2.status).toBe(403);
    // The cookie alone (what another page of this host would send) is no session.
    expect((await get('/api/sandboxes', { cookie: session.cookie })).status).toBe(401);
    // A name that is not this server's (DNS rebinding).
    expect((await rawGet('/', { host: 'evil.example' })).status).toBe(403);
    expect(
      (await rawGet('/api/sandboxes', { host: 'evil.example', cookie: session.cookie, 'x-sandbox-mcp-csrf': session.csrf })).status,
    ).toBe(403);

    // A real page on another port of 127.0.0.1: the browser sends our cookie along (same site),
    // but its requests are refused, and the sandbox stays.
    const { context, page } = await freshPage();
    await signIn(page, TOKENS.alice);
    const killUrl = new URL(`/api/sandboxes/${encodeURIComponent(ids.a1)}/kill`, base).href;
    const evil: Server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(
        `<form id="f" method="post" action="${killUrl}"></form><a id="l" href="${new URL('/api/sandboxes', base).href}">list</a>` +
          `<script>fetch(${JSON.stringify(new URL('/api/sandboxes', base).href)}, { credentials: 'include' }).catch(() => {});</script>`,
      );
    });
    await new Promise<void>((resolve) => evil.listen(0, '127.0.0.1', resolve));
    try {
      const refusedBefore = (serverLog().match(/refused a dashboard request/g) ?? []).length;
      await page.goto(`http://127.0.0.1:${(evil.address() as AddressInfo).port}/`);
      await waitFor(() => (serverLog().match(/refused a dashboard request/g) ?? []).length > refusedBefore, 'the fetch refused');
      await Promise.all([page.waitForNavigation(), page.locator('#f').evaluate((form: any) => form.submit())]);
      expect(await page.locator('body').textContent()).toContain('permission_denied');
      // A link followed from there to the API: no Origin, but Sec-Fetch-Site says where it came from.
      await page.goBack();
      await Promise.all([page.waitForNavigation(), page.locator('#l').click()]);
      expect(await page.locator('body').textContent()).toContain('cross_site');
    } finally {
      evil.closeAllConnections();
      evil.close();
    }
    expect((await ok(mcp.alice, 'get_sandbox', { sandbox_id: ids.a1 })).status).toBe('running');
    await context.close();
    // Nothing secret reached the log.
    const log = serverLog();
    for (const value of [...Object.values(TOKENS), session.cookie.split('=')[1]!, session.csrf, SECRET]) expect(log).not.toContain(value);
    expect(log).toMatch(/"msg":"dashboard sign-in","via":"token","principal":"alice"/);
  });

  it("a task's hostile output (an <img onerror>, a </script>) is shown as text: no element and no handler comes from it", async () => {
    const task = await ok(mcp.alice, 'start_task', { sandbox_id: ids.a1, command: HOSTILE_COMMAND });
    await expect.poll(async () => (await ok(mcp.alice, 'get_task', { sandbox_id: ids.a1, task_id: task.task_id })).state).toBe('succeeded');
    const { context, page, errors } = await freshPage();
    await signIn(page, TOKENS.alice);
    await page.locator(`tr[data-sandbox="${ids.a1}"]`).click();
    await page.locator(`#tasks tr[data-task="${task.task_id}"]`).click();
    await expect.poll(() => page.locator('#output-state').getAttribute('data-state')).toBe('succeeded');
    for (const stream of ['#stdout', '#stderr']) {
      expect(await page.locator(stream).textContent()).toBe(HOSTILE_OUTPUT);
      // Text nodes only: the gap marker is the one element a stream may hold, and it is not there.
      expect(await page.locator(stream).evaluate((pre: any) => pre.children.length)).toBe(0);
    }
    expect(await page.evaluate(() => (globalThis as any).document.querySelectorAll('img, #injected').length)).toBe(0);
    expect(await page.evaluate(() => (globalThis as any).__pwned)).toBeUndefined();
    expect(errors).toEqual([]);
    await context.close();
  });

  it('twenty failed sign-ins are refused (429 past the limit), and the right token still signs in', async () => {
    const signInWith = (token: string) =>
      fetch(new URL('/api/session', base), {
        method: 'POST',
        headers: { 'content-type': 'application/json', origin: new URL(base).origin },
        body: JSON.stringify({ token }),
      });
    const statuses: number[] = [];
    for (let i = 0; i < 20; i++) statuses.push((await signInWith(`wrong-token-${i}-0123456789abcdef`)).status);
    // Ten failures a minute, server-wide: twenty in a row pass it (whatever minute they start in).
    expect(statuses).toContain(429);
    expect(statuses.every((s) => s === 401 || s === 429)).toBe(true);
    const right = await signInWith(TOKENS.alice);
    expect(right.status).toBe(200);
    expect(((await right.json()) as { principal: { name: string } }).principal.name).toBe('alice');
    // The limit still holds for the wrong ones.
    expect((await signInWith('wrong-token-again-0123456789abcdef')).status).toBe(429);
  });
});

describe('sandbox-mcp http --no-dashboard', () => {
  it('serves /mcp only: the page and the API are not there', async () => {
    const bare = await startHttp({ SANDBOX_MCP_STATE_DIR: stateDir }, ['--no-dashboard']);
    try {
      for (const path of ['/', '/assets/dashboard.js', '/api/sandboxes'])
        expect((await fetch(new URL(path, bare.url))).status, path).toBe(404);
      expect((await bare.connect()).client.getServerVersion()?.name).toBe('sandbox-mcp');
    } finally {
      await bare.stop();
    }
  });
});

describe('sandbox-mcp dashboard (stdio users)', () => {
  let child: ChildProcessWithoutNullStreams;
  let stderr = '';
  const links = (): string[] => [...stderr.matchAll(/open (http:\/\/127\.0\.0\.1:\d+\/#code=[A-Za-z0-9_-]+)/g)].map((m) => m[1]!);

  beforeAll(async () => {
    child = spawn(process.execPath, [HOST_JS, 'dashboard'], { env: serverEnv({ SANDBOX_MCP_STATE_DIR: stateDir }) });
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    await waitFor(() => links().length > 0, 'the one-time link');
  });
  afterAll(async () => {
    if (child.exitCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    }
  });

  it('signs in with the one-time link once, takes the code out of the address bar, and sees every sandbox of the state directory', async () => {
    const [link] = links();
    expect(new URL(link!).hostname).toBe('127.0.0.1');
    const { context, page } = await freshPage();
    await page.goto(link!);
    await page.locator('#sandboxes tbody tr').first().waitFor();
    expect(page.url()).not.toContain('code=');
    expect(await page.locator('#who').textContent()).toBe('operator');
    expect(await rows(page)).toEqual(expect.arrayContaining([ids.a1, ids.b1]));
    // At 1280 pixels the sandboxes, with their Owner column, fit their panel: nothing to scroll sideways to.
    expect(await page.locator('.sandboxes').evaluate((el: any) => el.scrollWidth - el.clientWidth)).toBeLessThanOrEqual(0);
    await page.screenshot({ path: screenshotPath('dashboard-operator') });
    // The same link again (another browser): spent.
    const second = await freshPage();
    await second.page.goto(link!);
    await expect.poll(() => second.page.locator('#signin-error').textContent()).toContain('used already or has expired');
    // Enter prints a new link, which works.
    child.stdin.write('\n');
    await waitFor(() => links().length === 2, 'a new link');
    const third = await second.context.newPage();
    await third.goto(links()[1]!);
    await third.locator('#sandboxes tbody tr').first().waitFor();
    await Promise.all([context.close(), second.context.close()]);
    expect(stderr).toMatch(/"msg":"dashboard sign-in","via":"one-time code"/);
  });
});
