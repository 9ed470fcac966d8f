// The MCP App task view against the built `sandbox-mcp http` and real local sandboxes: the view
// (the server's ui:// resource) runs in Debian's chromium inside a host harness — ext-apps'
// AppBridge and a real MCP client (test/fixtures/app-host) — as chat hosts render it. It shows a
// running task's output as it grows, masked, and its end state; cancel works from it; a get_task
// view waits for Follow; a finished run_command shows its result. Clients that do not advertise
// the extension see exactly the tools and results they saw before. Screenshots go to
// test-artifacts/screenshots/ (git-ignored).
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { build } from 'esbuild';
import { readFileSync } from 'node:fs';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Browser, FrameLocator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { APP_MIME_TYPE, TASK_VIEW_TOOLS, TASK_VIEW_URI } from '../../host/mcp/apps.js';
import { launchBrowser, requireChromium, screenshotPath } from '../support/browser.js';
import { type HttpServer, ok, startHttp } from '../support/built-server.js';
import { HOSTILE_COMMAND, HOSTILE_OUTPUT } from '../support/hostile-text.js';
import { FIXTURES } from '../support/paths.js';
import { requireSandboxes } from '../support/prerequisites.js';
import { destroyStateDir, tempStateDir } from '../support/state-dir.js';

const SECRET = 'S3cretForTheTaskViewXYZ';
/** Prints a line five times a second; once /tmp/go appears, one marker line. */
const TICKER =
  'echo "token is $MY_API_TOKEN"; i=0; while :; do i=$((i+1)); echo "tick $i"; echo "err $i" >&2; ' +
  'if [ -f /tmp/go ]; then echo "MARKER after load"; rm -f /tmp/go; fi; sleep 0.2; done';

/** More than the 1 MiB a log keeps, then a last line that only the stream's kept end can show. */
const SPEW = 'head -c 1200000 /dev/zero | tr "\\0" a; echo THE-END';

const stateDir = tempStateDir();
let server: HttpServer;
let proxy: Server;
let browser: Browser;
let page: Page;
let plain: Client;
let sandboxId = '';
const pageErrors: string[] = [];

/** Serves the harness and forwards /mcp to the server, so the page and /mcp share one origin (the server refuses others). */
async function startHarnessProxy(target: URL, hostJs: string): Promise<Server> {
  const files: Record<string, [string, string]> = {
    '/': ['text/html', readFileSync(join(FIXTURES, 'app-host', 'host.html'), 'utf8')],
    '/host.js': ['text/javascript', hostJs],
  };
  const csp =
    "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'";
  const srv = createServer((req, res) => {
    const file = files[req.url ?? ''];
    if (file) {
      res.writeHead(200, { 'content-type': file[0], 'content-security-policy': csp });
      return void res.end(file[1]);
    }
    if (!(req.url ?? '').startsWith('/mcp')) return void res.writeHead(404).end();
    const { origin: _origin, ...headers } = req.headers;
    const upstream = request(
      { host: target.hostname, port: target.port, path: req.url, method: req.method, headers: { ...headers, host: target.host } },
      (r) => {
        res.writeHead(r.statusCode ?? 502, r.headers);
        r.pipe(res);
      },
    );
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  return srv;
}

beforeAll(async () => {
  requireSandboxes();
  requireChromium();
  server = await startHttp({ SANDBOX_MCP_STATE_DIR: stateDir });
  plain = (await server.connect()).client;
  const bundle = await build({
    entryPoints: [join(FIXTURES, 'app-host', 'host.mjs')],
    bundle: true,
    platform: 'browser',
    format: 'esm',
    target: 'chrome120',
    write: false,
    logLevel: 'warning',
  });
  proxy = await startHarnessProxy(server.url, bundle.outputFiles[0]!.text);
  browser = await launchBrowser();
  page = await browser.newPage({ viewport: { width: 900, height: 1000 } });
  page.on('pageerror', (e) => pageErrors.push(e.message));
  page.on('console', (m) => void (m.type() === 'error' && pageErrors.push(m.text())));
  await page.goto(`http://127.0.0.1:${(proxy.address() as AddressInfo).port}/`);
  await page.locator('body[data-ready=true]').waitFor();
  const started = await page.evaluate((token) => (globalThis as any).harness.start(token), server.token);
  expect(started.capabilities.resources).toBeDefined();
  const created = await page.evaluate(
    (secret) => (globalThis as any).harness.callTool('create_sandbox', { timeout: 600, envs: { MY_API_TOKEN: secret } }),
    SECRET,
  );
  sandboxId = created.structuredContent.sandbox_id;
});

afterAll(async () => {
  await browser?.close();
  proxy?.closeAllConnections();
  proxy?.close();
  await server?.stop();
  await destroyStateDir(stateDir);
});

/** Calls `name` through the harness as a host with views does; the view's frame. */
async function callWithView(name: string, args: Record<string, unknown>): Promise<{ result: any; view: FrameLocator }> {
  const { result, index } = await page.evaluate(([n, a]) => (globalThis as any).harness.callWithView(n, a), [name, args] as const);
  expect(result.isError, JSON.stringify(result.content)).toBeFalsy();
  return { result, view: page.frameLocator('iframe').nth(index) };
}

describe('the MCP App task view', () => {
  it('is offered only to clients that render MCP Apps: the others see no _meta and no resource', async () => {
    const { tools } = await page.evaluate(() => (globalThis as any).harness.listTools());
    const linked = tools.filter((t: any) => t._meta?.ui?.resourceUri === TASK_VIEW_URI).map((t: any) => t.name);
    expect(linked.sort()).toEqual([...TASK_VIEW_TOOLS].sort());
    expect(tools.find((t: any) => t.name === 'start_task')._meta['ui/resourceUri']).toBe(TASK_VIEW_URI);
    const { resources } = await page.evaluate(() => (globalThis as any).harness.listResources());
    expect(resources).toEqual([expect.objectContaining({ uri: TASK_VIEW_URI, mimeType: APP_MIME_TYPE })]);

    const plainTools = (await plain.listTools()).tools;
    expect(plainTools.map((t) => t.name)).toEqual(tools.map((t: any) => t.name));
    expect(plainTools.filter((t) => t._meta !== undefined)).toEqual([]);
    expect((await plain.listResources()).resources).toEqual([]);
    // An unknown uri: MCP's "resource not found", the uri not repeated.
    const unknown = await plain.readResource({ uri: 'ui://sandbox-mcp/secret-name.html' }).catch((e: Error) => e);
    expect(unknown).toBeInstanceOf(Error);
    expect((unknown as Error).message).toContain('-32002');
    expect((unknown as Error).message).not.toContain('secret-name');
  });

  it("follows a running task's output as it grows (masked), cancels it from the view, and shows its end state", async () => {
    const { result, view } = await callWithView('start_task', { sandbox_id: sandboxId, command: TICKER });
    await view.locator('#stdout').getByText('tick 3').waitFor();
    await view.locator('#stderr').getByText('err 2').waitFor();
    const stdout = (await view.locator('#stdout').textContent())!;
    expect(stdout).toContain('token is [MASKED]');
    expect(stdout).not.toContain(SECRET);
    expect(await view.locator('#state').textContent()).toContain('running');
    await ok(plain, 'write_file', { sandbox_id: sandboxId, path: '/tmp/go', content: 'x' });
    await view.locator('#stdout').getByText('MARKER after load').waitFor();
    await page.screenshot({ path: screenshotPath('task-view-running') });

    // The confirmation is inline (hosts block confirm()): keeping it running changes nothing.
    await view.locator('#cancel').click();
    await view.locator('#confirm-no').click();
    expect((await ok(plain, 'get_task', { sandbox_id: sandboxId, task_id: result.structuredContent.task_id })).state).toBe('running');
    await view.locator('#cancel').click();
    await view.locator('#confirm-yes').click();
    await view.locator('body[data-state=cancelled][data-following=false]').waitFor({ timeout: 15_000 });
    expect(await view.locator('#state').textContent()).toBe('■ cancelled');
    expect((await ok(plain, 'get_task', { sandbox_id: sandboxId, task_id: result.structuredContent.task_id })).state).toBe('cancelled');
  });

  it('shows a task that ends by itself with its exit code, all of its output, and its size against the cap', async () => {
    const { view } = await callWithView('start_task', {
      sandbox_id: sandboxId,
      command: 'for i in 1 2 3; do echo "n$i"; sleep 0.3; done; printf "é%.0s" $(seq 1 40000); echo; exit 3',
    });
    await view.locator('body[data-state=failed][data-following=false]').waitFor({ timeout: 15_000 });
    expect(await view.locator('#exit').textContent()).toBe('3');
    const stdout = (await view.locator('#stdout').textContent())!;
    // Read across several pages (80 KB of two-byte characters): every character whole.
    expect(stdout).toMatch(/^n1\nn2\nn3\n/);
    expect(stdout).not.toContain('\uFFFD');
    expect([...stdout.matchAll(/é/g)]).toHaveLength(40000);
    expect(await view.locator('#stdout-size').textContent()).toMatch(/of 1 MiB$/);
  });

  it("a task's hostile output and command (an <img onerror>, a </script>) are shown as text: no element and no handler comes from them", async () => {
    const { view } = await callWithView('start_task', { sandbox_id: sandboxId, command: HOSTILE_COMMAND });
    await view.owner().scrollIntoViewIfNeeded();
    await view.locator('body[data-state=succeeded][data-following=false]').waitFor({ timeout: 15_000 });
    expect(await view.locator('#stdout').textContent()).toBe(HOSTILE_OUTPUT);
    expect(await view.locator('#stderr').textContent()).toBe(HOSTILE_OUTPUT);
    expect(await view.locator('#command').textContent()).toBe(HOSTILE_COMMAND);
    const found = await view.locator('body').evaluate((body: any) => ({
      elements: body.ownerDocument.querySelectorAll('img, #injected').length,
      children: ['stdout', 'stderr', 'command'].map((id) => body.ownerDocument.getElementById(id).children.length),
      pwned: body.ownerDocument.defaultView.__pwned,
    }));
    expect(found).toEqual({ elements: 0, children: [0, 0, 0], pwned: undefined });
  });

  // A bound for a broken run: 19 s at most in 48 runs of the suite (6 s typically).
  it('a stream over the 1 MiB cap shows its first MiB, a marked gap and its real end, followed or as one get_task page', async () => {
    const { result, view } = await callWithView('start_task', { sandbox_id: sandboxId, command: SPEW });
    // The view follows only while on screen: below the earlier views, it is not yet.
    await view.owner().scrollIntoViewIfNeeded();
    await view.locator('body[data-state=succeeded][data-following=false]').waitFor({ timeout: 30_000 });
    const gap = view.locator('#stdout .gap');
    expect(await gap.textContent()).toContain('more than 1 MiB');
    expect(await gap.textContent()).toContain('not kept (how many is not known)');
    const stdout = (await view.locator('#stdout').textContent())!;
    expect(stdout.startsWith('a'.repeat(1024 * 1024) + (await gap.textContent())!)).toBe(true);
    expect(stdout.endsWith('aaaTHE-END\n')).toBe(true);
    const size = (await view.locator('#stdout-size').textContent())!;
    expect(size).toContain("the stream's last 32 KiB are shown after the gap");
    expect(size).not.toContain('the rest was not kept');
    await gap.evaluate((el: any) => el.scrollIntoView({ block: 'center' }));
    expect(await gap.isVisible()).toBe(true);
    await page.screenshot({ path: screenshotPath('task-view-tail-gap') });

    // get_task's page that reaches the end of the log carries the end too: shown without Follow.
    const got = await callWithView('get_task', {
      sandbox_id: sandboxId,
      task_id: result.structuredContent.task_id,
      stdout_offset: 1024 * 1024,
      wait: 0,
    });
    expect(got.result.structuredContent.stdout_tail).toMatch(/THE-END\n$/);
    await got.view.locator('#follow').waitFor();
    expect(await got.view.locator('#stdout .gap').count()).toBe(1);
    expect(await got.view.locator('#stdout').textContent()).toMatch(/not known\) ⋯a+THE-END\n$/);
    expect(await got.view.locator('#stdout-size').textContent()).toContain('shown after the gap');
    await page.screenshot({ path: screenshotPath('task-view-tail-get'), fullPage: true });
  }, 180_000);

  it('a get_task result is shown as it is until Follow; a finished run_command shows its result and follows nothing', async () => {
    const task = await ok(plain, 'start_task', { sandbox_id: sandboxId, command: 'echo first; sleep 1; echo second' });
    const { view } = await callWithView('get_task', { sandbox_id: sandboxId, task_id: task.task_id, wait: 0 });
    await view.locator('#follow').waitFor();
    expect(await view.locator('body').getAttribute('data-following')).toBeNull();
    await view.locator('#follow').click();
    await view.locator('body[data-state=succeeded][data-following=false]').waitFor({ timeout: 15_000 });
    expect(await view.locator('#stdout').textContent()).toBe('first\nsecond\n');

    const run = await callWithView('run_command', { sandbox_id: sandboxId, command: 'echo hi; echo oops >&2' });
    await run.view.locator('body[data-state=finished]').waitFor();
    expect(await run.view.locator('#state').textContent()).toBe('✓ finished, exit code 0');
    expect(await run.view.locator('#stdout').textContent()).toBe('hi\n');
    expect(await run.view.locator('#stderr').textContent()).toBe('oops\n');
    expect(await run.view.locator('#follow').isHidden()).toBe(true);
    await page.screenshot({ path: screenshotPath('task-view-finished'), fullPage: true });
    expect(pageErrors).toEqual([]);
  });
});
