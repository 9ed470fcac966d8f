// The name of the template every local sandbox gets when create names none, apart from the
// template store (store.ts) and its schemas: the keeper reads a sandbox's spec and needs only the
// name, so it loads no zod (about 4 MiB of memory per idle keeper, issue 21).

/** The template every local sandbox gets when create names none: the host's system directories, read-only. */
export const BASE_TEMPLATE = 'base';
