// Builds the artefacts: dist/agent.cjs (one self-contained CommonJS file pushed into sandboxes),
// dist/host.js (the MCP server CLI), dist/keeper.cjs (the local provider's per-sandbox keeper) and
// dist/helpers/ (the local provider's perl helpers, copied). Prints nothing on success, because
// `npm start` runs this before serving MCP on stdout. A file whose bytes did not change is left
// alone, and a changed one replaced by a rename: a server, keeper or CLI starting from dist/ while
// this runs (a test run beside `npm start`, a server loading its e2b chunk late) reads the old or
// the new file whole, never one truncated mid-write.
import { build } from 'esbuild';
import { Buffer } from 'node:buffer';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const dist = join(root, 'dist');

// Every bundle targets the oldest Node.js package.json's engines admits (its lowest `>=` bound, e.g.
// node20.18.1): the host runs on any supported line, and the agent on whichever node a sandbox has.
const [oldestNode] = [...pkg.engines.node.matchAll(/>=\s*v?(\d+(?:\.\d+){0,2})/g)]
  .map((m) => m[1])
  .sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));
if (!oldestNode) throw new Error(`package.json's engines.node (${pkg.engines.node}) has no lower bound to target`);

const common = { bundle: true, platform: 'node', target: `node${oldestNode}`, logLevel: 'warning', legalComments: 'none', write: false };

/** Puts `bytes` at `file` unless it already holds them: written beside it, then renamed over it. */
function writeOutput(file, bytes, mode = 0o644) {
  if (existsSync(file) && readFileSync(file).equals(bytes)) {
    chmodSync(file, mode);
    return;
  }
  mkdirSync(dirname(file), { recursive: true });
  const temporary = `${file}.${process.pid}.tmp`;
  writeFileSync(temporary, bytes);
  chmodSync(temporary, mode);
  renameSync(temporary, file);
}

/** Writes every output file of an esbuild result (built with write: false). */
function writeOutputs(result, modes = {}) {
  for (const f of result.outputFiles) writeOutput(f.path, Buffer.from(f.contents), modes[f.path]);
}

// The agent is its bundle (agent/main.ts) as a string in a small head (agent/boot.ts) that
// compiles it with V8's code cache: node then reads the code an earlier agent process compiled
// instead of compiling it again. The string is already the function the head compiles (the
// CommonJS wrapper around the bundle): the head compiles the literal itself, not a copy of it
// made by adding the wrapper at run time (250 KB more in every agent process).
const agentBody = `(function (exports, require, module, __filename, __dirname) {${
  (
    await build({
      ...common,
      entryPoints: [join(root, 'agent/main.ts')],
      format: 'cjs',
      define: { __AGENT_VERSION__: JSON.stringify(pkg.version) },
    })
  ).outputFiles[0].text
}\n})`;
writeOutputs(
  await build({
    ...common,
    entryPoints: [join(root, 'agent/boot.ts')],
    outfile: join(dist, 'agent.cjs'),
    format: 'cjs',
    define: {
      __AGENT_BODY__: JSON.stringify(agentBody),
      __AGENT_BODY_SHA256__: JSON.stringify(createHash('sha256').update(agentBody).digest('hex')),
    },
  }),
);

// The host derives the agent's in-sandbox file name from its content, so a new build never
// overwrites an agent that supervises running tasks.
const agentBytes = readFileSync(join(dist, 'agent.cjs'));
const sha256 = createHash('sha256').update(agentBytes).digest('hex');
writeOutput(
  join(dist, 'agent-manifest.json'),
  Buffer.from(
    JSON.stringify({ version: pkg.version, sha256, file_name: `agent-${pkg.version}-${sha256.slice(0, 16)}.cjs` }, null, 2) + '\n',
  ),
);

// Code-split so that the E2B SDK is loaded only when the e2b provider is first used (cli.ts).
const host = await build({
  ...common,
  entryPoints: { host: join(root, 'host/main.ts') },
  outdir: dist,
  splitting: true,
  chunkNames: 'chunks/[name]-[hash]',
  format: 'esm',
  packages: 'external',
  banner: { js: '#!/usr/bin/env node' },
  define: { __HOST_VERSION__: JSON.stringify(pkg.version), __NODE_ENGINES__: JSON.stringify(pkg.engines.node) },
  metafile: true,
});
writeOutputs(host, { [join(dist, 'host.js')]: 0o755 });
// Remove chunks of earlier builds only now, so a server started before this build keeps its files.
const current = new Set(Object.keys(host.metafile.outputs).map((o) => resolve(o))); // relative to the cwd
for (const name of existsSync(join(dist, 'chunks')) ? readdirSync(join(dist, 'chunks')) : []) {
  if (!current.has(join(dist, 'chunks', name))) rmSync(join(dist, 'chunks', name), { force: true });
}

// The local provider's per-sandbox keeper gets its own small entry: a keeper that loaded the
// whole server (MCP and E2B SDKs) would start several times slower and weigh far more per sandbox.
// CommonJS: node's ES module loader costs an idle keeper some 0.6 MiB more on Node 26 (0.3 on
// Node 20) for the life of its sandbox (docs/performance.md, idle memory).
writeOutputs(
  await build({
    ...common,
    entryPoints: [join(root, 'host/providers/local/keeper/main.ts')],
    outfile: join(dist, 'keeper.cjs'),
    format: 'cjs',
    packages: 'external',
  }),
);

// The local provider's perl helpers (host/providers/local/helpers/), read by the server and the
// keeper from dist/helpers/ at run time (launch/perl-helpers.ts).
const helpersSource = join(root, 'host/providers/local/helpers');
for (const name of readdirSync(helpersSource).filter((n) => n.endsWith('.pl'))) {
  writeOutput(join(dist, 'helpers', name), readFileSync(join(helpersSource, name)));
}
// The browser pages: bundled for a browser, nothing loaded from elsewhere at run time. zod (which
// the MCP SDK's and ext-apps' schemas use) is not tree-shaken, and its `export * as locales`
// would add 64 languages (265 KB) no page shows: English only.
const zodEnglishOnly = {
  name: 'zod-english-only',
  setup(b) {
    b.onResolve({ filter: /locales\/index\.js$/ }, (args) =>
      args.importer.includes('/zod/') ? { path: 'zod-locales-en', namespace: 'zod-english-only' } : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: 'zod-english-only' }, () => ({
      contents: "export { default as en } from 'zod/v4/locales/en.js';",
      resolveDir: root,
    }));
  },
};
const browser = { ...common, platform: 'browser', target: 'chrome120', format: 'esm', minify: true, plugins: [zodEnglishOnly] };

// The MCP App task view: one self-contained HTML file (script and styles inline), the text of
// its ui:// resource.
const viewDir = join(root, 'host/mcp/task-view');
const viewJs = (await build({ ...browser, entryPoints: [join(viewDir, 'task-view.ts')] })).outputFiles[0].text;
// Inline in <script>: a `</script` or `<!--` inside would end or confuse the element.
if (/<\/script|<!--/i.test(viewJs)) throw new Error('the task view bundle cannot be inlined in a <script> element');
// Both pages that show a task's output follow it with host/util/follow-task.ts, and style what it adds alike.
const followCss = readFileSync(join(root, 'host/util/follow-task.css'), 'utf8');
const viewCss = readFileSync(join(viewDir, 'task-view.css'), 'utf8') + followCss;
if (/<\/style/i.test(viewCss)) throw new Error('the task view styles cannot be inlined in a <style> element');
const viewHtml = readFileSync(join(viewDir, 'task-view.html'), 'utf8')
  .replace(/<style>\s*\/\*CSS\*\/\s*<\/style>/, () => `<style>${viewCss}</style>`)
  .replace(/<script>\s*\/\*JS\*\/\s*<\/script>/, () => `<script type="module">${viewJs}</script>`);
if (viewHtml.includes('/*JS*/') || viewHtml.includes('/*CSS*/')) throw new Error('task-view.html lacks a placeholder');
writeOutput(join(dist, 'task-view.html'), Buffer.from(viewHtml));

// The dashboard page: its script and styles as files of their own (its Content-Security-Policy
// allows no inline script or style), served by the server from dist/dashboard/.
const pageDir = join(root, 'host/dashboard/page');
const pageJs = (await build({ ...browser, entryPoints: [join(pageDir, 'page.ts')] })).outputFiles[0].contents;
writeOutput(join(dist, 'dashboard', 'dashboard.js'), Buffer.from(pageJs));
writeOutput(join(dist, 'dashboard', 'dashboard.css'), Buffer.from(readFileSync(join(pageDir, 'dashboard.css'), 'utf8') + followCss));
writeOutput(join(dist, 'dashboard', 'index.html'), readFileSync(join(pageDir, 'index.html')));
