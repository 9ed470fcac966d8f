// The end-to-end check: a real local sandbox, created with the server's own settings, runs the
// agent's node (which tasks need: the server's own, bound into every sandbox) and `python3`
// (run_code's default language), then is destroyed.
import { isProviderError } from '../../providers/provider-error.js';
import type { Provider } from '../../providers/provider.js';
import { fail, ok, warn, type Check } from './check.js';

/** Creates a sandbox with `provider`, runs node and python3 in it, destroys it. */
export async function checkSandbox(provider: Provider): Promise<Check[]> {
  let id: string;
  try {
    id = (await provider.create({ timeoutS: 120 })).sandbox_id;
  } catch (e) {
    const why = isProviderError(e) ? e.suggestion : 'an unexpected error';
    return [fail('sandbox', `a sandbox did not start (${isProviderError(e) ? e.category : 'internal'})`, why)];
  }
  const run = async (command: string): Promise<string | undefined> => {
    try {
      const r = await provider.exec(id, command, { timeoutS: 60 });
      return r.exitCode === 0 ? r.stdout.toString('utf8').trim() : undefined;
    } catch {
      return undefined;
    }
  };
  try {
    const node = await run(`${provider.agentNode ?? 'node'} -e "process.stdout.write(process.version)"`);
    const python = await run('python3 -c "import platform; print(platform.python_version())"');
    return [
      ok('sandbox', `a local sandbox started, ran commands and was destroyed`),
      node
        ? ok('node in sandbox', `the agent's node ${node} runs inside`)
        : fail(
            'node in sandbox',
            "the agent's node (the server's own, bound into each sandbox) does not run inside: tasks (start_task) need it",
            'run sandbox-mcp doctor as the user the server runs as; reinstall Node.js if it persists',
          ),
      python
        ? ok('python3 in sandbox', `python3 ${python} runs inside`)
        : warn(
            'python3 in sandbox',
            'python3 does not run inside a sandbox: run_code with python fails',
            'install python3 (apt-get install python3)',
          ),
    ];
  } finally {
    await provider.kill(id).catch(() => undefined);
  }
}
