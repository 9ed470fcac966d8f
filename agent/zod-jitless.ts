// Imported first by main.ts, before anything evaluates zod. zod compiles a parser per object
// schema with `new Function` on first use; for an agent that parses one request and one status
// file per process, interpreting is faster than compiling (it saves ~2 ms of every call).
(globalThis as { __zod_globalConfig?: Record<string, unknown> }).__zod_globalConfig ??= {};
(globalThis as unknown as { __zod_globalConfig: Record<string, unknown> }).__zod_globalConfig.jitless = true;
