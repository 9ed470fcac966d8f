// The keeper's one-line JSON report to the provider that started it (on fd 3): ready, or a
// static failure code the provider maps to a ProviderError. No text of the system's crosses it.

/** Static failure codes the keeper reports to the provider (mapped to ProviderErrors there). */
export type KeeperFailure =
  'spec_invalid' | 'cgroup_unavailable' | 'tool_missing' | 'userns_refused' | 'userns_apparmor' | 'bwrap_failed' | 'start_timeout';

/** The one line the keeper writes on fd 3. */
export type KeeperReport = { ok: true } | { ok: false; code: KeeperFailure };
