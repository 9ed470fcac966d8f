// Schemas built on first use. Building every zod schema of the protocol was most of what the
// agent's bundle did at load (570 schemas, some 10 ms of an `agent.cjs call get` that needs 80 of
// them), and every node process of the agent paid it: each call, each cold supervisor (which needs
// none), each resident start. A schema written as `lazySchema(() => z.…)` stays one definition,
// used as the schema itself by host, agent and tests; it is built the first time anything reads a
// property of it (parsing, `.shape`, composing it into another schema), once.

/**
 * The schema `build` returns, built on first use: a stand-in that forwards every property read,
 * write and check to it. Its identity is the stand-in's (a schema composed of it holds the
 * stand-in), which zod only uses as a key of its own maps.
 */
export function lazySchema<T extends object>(build: () => T): T {
  let built: T | undefined;
  const schema = (): T => (built ??= build());
  return new Proxy({} as T, {
    get: (_, key) => Reflect.get(schema(), key),
    set: (_, key, value) => Reflect.set(schema(), key, value),
    has: (_, key) => Reflect.has(schema(), key),
    getPrototypeOf: () => Reflect.getPrototypeOf(schema()),
    ownKeys: () => Reflect.ownKeys(schema()),
    // Reported configurable: a proxy may not report a property the stand-in lacks as fixed.
    getOwnPropertyDescriptor: (_, key) => {
      const descriptor = Reflect.getOwnPropertyDescriptor(schema(), key);
      return descriptor && { ...descriptor, configurable: true };
    },
    defineProperty: (_, key, descriptor) => Reflect.defineProperty(schema(), key, descriptor),
    deleteProperty: (_, key) => Reflect.deleteProperty(schema(), key),
  });
}
