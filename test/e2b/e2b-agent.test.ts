// The real agent bundle (dist/agent.cjs, built by `npm run build`) pushed into a fake E2B sandbox
// through the e2b provider and driven with `node <agent> call <base64url JSON>`, as the host does.
import { existsSync, readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createE2bProvider } from '../../host/providers/e2b/e2b-provider.js';
import type { Provider } from '../../host/providers/provider.js';
import {
  encodeRequest,
  HelloResultSchema,
  ResponseSchema,
  TaskViewSchema,
  TERMINAL_STATES,
  type AgentRequestInput,
  type TaskView,
} from '../../shared/protocol.js';
import { startFakeE2b, type FakeE2b } from '../e2b-fake/index.js';

const AGENT = path.resolve(import.meta.dirname, '../../dist/agent.cjs');
const AGENT_IN_SANDBOX = '.local/share/sandbox-mcp-test/agent.cjs';

let fake: FakeE2b;
let provider: Provider;
let sandboxId: string;

async function call(req: AgentRequestInput): Promise<unknown> {
  const r = await provider.exec(sandboxId, `node "$HOME/${AGENT_IN_SANDBOX}" call ${encodeRequest(req)}`, { timeoutS: 30 });
  expect(r.stderr.toString()).toBe('');
  expect(r.exitCode).toBe(0);
  const lines = r.stdout.toString().trim().split('\n');
  expect(lines).toHaveLength(1);
  const res = ResponseSchema.parse(JSON.parse(lines[0]!));
  expect(res.protocol).toBe(1);
  if (!res.ok) throw new Error(`agent error ${res.error.code}`);
  return res.result;
}

beforeAll(async () => {
  if (!existsSync(AGENT)) throw new Error('dist/agent.cjs is missing: run `npm run build` first');
  fake = await startFakeE2b();
  provider = createE2bProvider({ apiKey: fake.apiKey, apiUrl: fake.apiUrl, sandboxUrl: fake.sandboxUrl });
  sandboxId = (await provider.create({ timeoutS: 120 })).sandbox_id;
  const bundle = readFileSync(AGENT);
  expect(await provider.writeFile(sandboxId, AGENT_IN_SANDBOX, bundle)).toEqual({ size: bundle.length });
});

afterAll(async () => {
  await provider?.close();
  await fake?.close();
});

test('the agent answers hello inside a fake E2B sandbox', async () => {
  const hello = HelloResultSchema.parse(await call({ protocol: 1, op: 'hello' }));
  expect(hello.protocol).toBe(1);
});

test('the agent starts a short task and reports its outcome', async () => {
  const taskId = randomBytes(16).toString('hex');
  const started = TaskViewSchema.parse(
    await call({ protocol: 1, op: 'start', task_id: taskId, command: 'echo out; echo err >&2; exit 3', timeout_s: 30 }),
  );
  expect(started.task_id).toBe(taskId);
  let view: TaskView = started;
  for (let i = 0; i < 20 && !TERMINAL_STATES.has(view.state); i++) {
    view = TaskViewSchema.parse(await call({ protocol: 1, op: 'get', task_id: taskId, wait_s: 2 }));
  }
  expect(view).toMatchObject({ state: 'failed', exit_code: 3, stdout: 'out\n', stderr: 'err\n' });
});
