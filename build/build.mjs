// Builds the two artefacts: dist/agent.cjs (one self-contained CommonJS file pushed into
// sandboxes) and dist/host.js (the MCP server CLI). Prints nothing on success, because
// `npm start` runs this before serving MCP on stdout.
import { build } from 'esbuild';
import { createHash } from 'node:crypto';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const dist = join(root, 'dist');

const common = { bundle: true, platform: 'node', target: 'node20', logLevel: 'warning', legalComments: 'none' };

await build({
  ...common,
  entryPoints: [join(root, 'agent/main.ts')],
  outfile: join(dist, 'agent.cjs'),
  format: 'cjs',
  define: { __AGENT_VERSION__: JSON.stringify(pkg.version) },
});

// The host derives the agent's in-sandbox file name from its content, so a new build never
// overwrites an agent that supervises running tasks.
const agentBytes = readFileSync(join(dist, 'agent.cjs'));
const sha256 = createHash('sha256').update(agentBytes).digest('hex');
writeFileSync(
  join(dist, 'agent-manifest.json'),
  JSON.stringify({ version: pkg.version, sha256, file_name: `agent-${pkg.version}-${sha256.slice(0, 16)}.cjs` }, null, 2) + '\n',
);

await build({
  ...common,
  entryPoints: [join(root, 'host/main.ts')],
  outfile: join(dist, 'host.js'),
  format: 'esm',
  packages: 'external',
  banner: { js: '#!/usr/bin/env node' },
  define: { __HOST_VERSION__: JSON.stringify(pkg.version) },
});
chmodSync(join(dist, 'host.js'), 0o755);
