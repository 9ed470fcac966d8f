// Benchmarks of the dashboard (`npm run bench`), measured in the browser (Debian's chromium) and
// on the server process, against the built `sandbox-mcp http` with 16 local sandboxes × 8 tasks:
//   first paint and the table filled, on reloads of a signed-in page;
//   a live update: a task prints its clock (date +%s%3N) when sent a line, and the page's
//   MutationObserver notes when the line is shown — the difference is print → screen;
//   the server's CPU (its own, and with the agent execs it waited for) over equal windows: no page,
//   a page on the overview, and a page following a task that prints 1 MiB/s (each stream keeps
//   1 MiB, so the first second streams and the rest is long polls).
// Reported, never asserted.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, bench, describe } from 'vitest';
import { LIMITS } from '../../shared/limits.js';
import { launchBrowser } from '../support/browser.js';
import { ok, startHttp } from '../support/built-server.js';
import { REPO } from '../support/paths.js';
import { destroyStateDir, tempStateDir } from '../support/state-dir.js';
import { sleep, waitFor } from '../support/wait.js';

if (!existsSync(join(REPO, 'dist/host.js'))) execFileSync(process.execPath, [join(REPO, 'build/build.mjs')]);

const SANDBOXES = 16;
const TASKS = 8;
const RELOADS = 5;
const UPDATES = 10;
const WINDOW_MS = 10_000;
const CLOCK_TICKS_PER_S = 100;

const stateDir = tempStateDir();
const server = await startHttp({ SANDBOX_MCP_STATE_DIR: stateDir, SANDBOX_MCP_MAX_SANDBOXES: String(SANDBOXES) });
const { client } = await server.connect();
let serverLog = '';
server.process.stderr!.on('data', (d: Buffer) => (serverLog += d.toString()));
/** Overview listings the page asked for so far. */
let listingCount = 0;
const listings = () => listingCount;
/** Tool calls the server logged so far, by tool. */
const toolCalls = (tool: string) => (serverLog.match(new RegExp(`"msg":"tool call","tool":"${tool}"`, 'g')) ?? []).length;
const base = new URL('/', server.url).href;
const log = (line: string) => process.stderr.write(`[dashboard bench] ${line}\n`);

const sandboxes: string[] = [];
for (let i = 0; i < SANDBOXES; i++) sandboxes.push((await ok(client, 'create_sandbox', { timeout: 1800 })).sandbox_id);
for (const [i, sandbox_id] of sandboxes.entries()) {
  for (let t = 0; t < TASKS - 1; t++) await ok(client, 'start_task', { sandbox_id, command: `echo done ${t}` });
  // The last task of each sandbox runs: the first one's answers a line with its clock.
  await ok(client, 'start_task', { sandbox_id, command: i === 0 ? 'echo ready; while read x; do date +%s%3N; done' : 'sleep 1800' });
}

const browser = await launchBrowser();
const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
// Notes when the table first holds every sandbox, and when text is added to stdout.
await context.addInitScript(`
  window.__marks = {};
  new MutationObserver(() => {
    const rows = document.querySelectorAll('#sandboxes tbody tr').length;
    if (rows >= ${SANDBOXES} && window.__marks.table === undefined) window.__marks.table = performance.now();
  }).observe(document, { subtree: true, childList: true });
`);
context.on('request', (r) => void (r.url().endsWith('/api/sandboxes') && listingCount++));
const page = await context.newPage();
await page.goto(base);
await page.locator('#token').fill(server.token);
await page.locator('#signin button[type=submit]').click();
await page.locator(`#sandboxes tbody tr:nth-child(${SANDBOXES})`).waitFor({ timeout: 60_000 });

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((s.length - 1) * p))]!;
}
const fmt = (xs: number[]) => `median ${pct(xs, 0.5).toFixed(0)} ms, p95 ${pct(xs, 0.95).toFixed(0)} ms (n=${xs.length})`;

// ---- first paint ---------------------------------------------------------------------------
const paints = { fcp: [] as number[], table: [] as number[], api: [] as number[] };
for (let i = 0; i < RELOADS; i++) {
  // Past the server's 2 s listing reuse: every reload lists afresh.
  await sleep(2100);
  await page.reload();
  await page.waitForFunction(() => (globalThis as any).__marks.table !== undefined, undefined, { timeout: 60_000 });
  const m = await page.evaluate(() => ({
    fcp: performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? NaN,
    table: (globalThis as any).__marks.table as number,
    api: performance.getEntriesByType('resource').find((e) => e.name.endsWith('/api/sandboxes'))?.duration ?? NaN,
  }));
  paints.fcp.push(m.fcp);
  paints.table.push(m.table);
  paints.api.push(m.api);
}
log(`${SANDBOXES} sandboxes × ${TASKS} tasks, ${RELOADS} reloads of a signed-in page (1280×800)`);
log(`first contentful paint      ${fmt(paints.fcp)}`);
log(`table filled (all rows)     ${fmt(paints.table)}   (from navigation start)`);
log(`GET /api/sandboxes          ${fmt(paints.api)}`);

// ---- a live update -------------------------------------------------------------------------
async function selectTask(p: Page, sandboxId: string, command: RegExp): Promise<string> {
  await p.locator(`tr[data-sandbox="${sandboxId}"]`).click();
  await p.locator('#tasks tbody tr').first().waitFor();
  for (const row of await p.locator('#tasks tbody tr').all()) {
    const id = (await row.getAttribute('data-task'))!;
    const view = await ok(client, 'get_task', { sandbox_id: sandboxId, task_id: id, limit: 64 });
    if (view.state === 'running' && command.test(view.stdout)) {
      await row.click();
      return id;
    }
  }
  throw new Error('no such task');
}
const readerId = await selectTask(page, sandboxes[0]!, /^ready/);
await page.locator('#stdout').getByText('ready').waitFor();
await page.evaluate(() => {
  const marks = (globalThis as any).__marks;
  marks.lines = [];
  const g = globalThis as any;
  new g.MutationObserver(() => marks.lines.push(Date.now())).observe(g.document.getElementById('stdout'), { childList: true });
});
const latencies: number[] = [];
for (let i = 0; i < UPDATES; i++) {
  const shown = await page.evaluate(() => (globalThis as any).__marks.lines.length as number);
  await ok(client, 'send_task_input', { sandbox_id: sandboxes[0], task_id: readerId, data: '\n' });
  await page.waitForFunction((n) => (globalThis as any).__marks.lines.length > n, shown, { timeout: 60_000 });
  const text = (await page.locator('#stdout').textContent())!;
  const printedAtMs = Number(text.trim().split('\n').at(-1));
  const shownAtMs = await page.evaluate(() => (globalThis as any).__marks.lines.at(-1) as number);
  latencies.push(shownAtMs - printedAtMs);
  await sleep(300);
}
log(`live update, printed → shown ${fmt(latencies)}`);

// ---- the server's CPU ----------------------------------------------------------------------
/** CPU ms of the server: its own, and with the children it waited for (the agent execs). */
function serverCpuMs(): { own: number; all: number } {
  const fields = readFileSync(`/proc/${server.process.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  const [utime, stime, cutime, cstime] = [11, 12, 13, 14].map((i) => Number(fields[i]));
  const ms = (ticks: number) => (ticks * 1000) / CLOCK_TICKS_PER_S;
  return { own: ms(utime! + stime!), all: ms(utime! + stime! + cutime! + cstime!) };
}
async function cpuOver<T>(what: string, run: () => Promise<T>): Promise<T> {
  const before = serverCpuMs();
  const [reads, lists] = [toolCalls('get_task'), listings()];
  const startedAtMs = Date.now();
  const result = await run();
  const after = serverCpuMs();
  const wallMs = Date.now() - startedAtMs;
  const share = (ms: number) => `${((ms / wallMs) * 100).toFixed(1)} %`;
  log(
    `${what.padEnd(46)} ${(wallMs / 1000).toFixed(1)} s: server ${share(after.own - before.own)} of a core, ` +
      `with its agent execs ${share(after.all - before.all)}; ${toolCalls('get_task') - reads} output reads, ${listings() - lists} listings`,
  );
  return result;
}
await page.close();
await cpuOver('no page open', () => sleep(WINDOW_MS));
const watcher = await context.newPage();
await watcher.goto(base);
await watcher.locator(`#sandboxes tbody tr:nth-child(${SANDBOXES})`).waitFor({ timeout: 60_000 });
await cpuOver('a page on the overview (refresh every 5 s)', () => sleep(WINDOW_MS));
// 16 KiB of base64 text 64 times a second: 1 MiB/s.
await ok(client, 'start_task', {
  sandbox_id: sandboxes[1],
  command: 'echo spew; while :; do head -c 12288 /dev/urandom | base64 -w 0; echo; sleep 0.0156; done',
});
await sleep(2100);
await watcher.reload();
await watcher.locator(`#sandboxes tbody tr:nth-child(${SANDBOXES})`).waitFor({ timeout: 60_000 });
await cpuOver('the page following a 1 MiB/s task: its 1 MiB', async () => {
  await selectTask(watcher, sandboxes[1]!, /^spew/);
  await waitFor(
    // Every byte of the stream's 1 MiB on screen (base64 and newlines: one character a byte).
    async () => (await watcher.locator('#stdout').evaluate((pre) => pre.textContent!.length)) >= LIMITS.streamCapBytes,
    'the first MiB shown',
    60_000,
  );
});
await cpuOver('… then, the stream at its cap (long polls)', () => sleep(WINDOW_MS));

afterAll(async () => {
  await browser.close();
  await client.close();
  await server.stop();
  await destroyStateDir(stateDir);
});

describe('the dashboard API with 16 sandboxes × 8 tasks', () => {
  bench(
    'GET /api/sandboxes (fresh listing)',
    async () => {
      await sleep(2100);
      await watcher.evaluate(() =>
        fetch('/api/sandboxes', { headers: { 'x-sandbox-mcp-csrf': (globalThis as any).localStorage.getItem('sandbox-mcp-csrf') } }).then(
          (r) => r.json(),
        ),
      );
    },
    { time: 1, iterations: 3 },
  );
});
