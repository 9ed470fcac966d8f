// Caller text that a lookup in a plain object would find on Object.prototype (`constructor`,
// `toString`, `__proto__`…): the names tests send where the server looks something up by name.

/** Every own property name of Object.prototype. */
export const PROTOTYPE_KEYS: readonly string[] = Object.getOwnPropertyNames(Object.prototype);
