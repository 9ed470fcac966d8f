// The names of run_code's program files, which the protocol's `remove_file` may name (and nothing
// else). Its own module, free of imports: the task supervisor checks a name read back from disk
// without loading the protocol's schemas.

/** `/tmp/sandbox-mcp-code-<16 lowercase hex>.<py|js|sh>`: the host makes these names (host/mcp/tools/exec.ts). */
export const RUN_CODE_FILE_PATTERN = /^\/tmp\/sandbox-mcp-code-[0-9a-f]{16}\.(?:py|js|sh)$/;
