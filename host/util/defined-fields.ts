// With exactOptionalPropertyTypes an optional field may be absent but never `undefined`; this
// builds such an object from values that may be undefined, in place of one conditional spread a field.

/** T with every field whose type admits undefined made optional and undefined-free. */
export type DefinedFields<T> = { [K in keyof T as undefined extends T[K] ? never : K]: T[K] } & {
  [K in keyof T as undefined extends T[K] ? K : never]?: Exclude<T[K], undefined>;
};

/** A copy of `fields` without the keys whose value is undefined (null and falsy values stay). */
export function definedFields<T extends object>(fields: T): DefinedFields<T> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(fields)) if (value !== undefined) out[key] = value;
  return out as DefinedFields<T>;
}
