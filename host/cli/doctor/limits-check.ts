// The resource limits local sandboxes get on this machine, by the layer that enforces each
// (limits/layers.ts): ok when memory and disk are bounded per sandbox, else a warning saying what
// does not hold and how to get it.
import type { LimitSettings } from '../../providers/local/limits/settings.js';
import { describeLayers, type MachineFacts } from '../../providers/local/limits/layers.js';
import { ok, warn, type Check } from './check.js';

/** One line naming, for every limit, what holds it here. */
export function checkLimits(facts: MachineFacts, settings: LimitSettings): Check {
  const layers = describeLayers(facts, settings);
  const message = layers.map((l) => `${l.limit}: ${l.heldBy}`).join('; ');
  const missing = layers.filter((l) => l.missing !== undefined && l.limit !== 'cpu');
  if (missing.length === 0) return ok('resource limits', message);
  return warn('resource limits', message, missing.map((l) => `${l.limit}: ${l.missing}`).join('; '));
}
