// Text a sandbox controls that would become markup if a page inserted it as HTML: the pages must
// show it as text (test/e2e/dashboard.test.ts, test/e2e/task-view.test.ts).

/** An image whose onerror would set a flag, a tag with an id, and a script end tag followed by a script. */
export const HOSTILE_LINES = [
  '<img src=x onerror="window.__pwned=1">',
  '</script><b id=injected>bold</b><script>window.__pwned=2</script>',
];

/** Prints HOSTILE_LINES to stdout and to stderr; its own text holds them too. */
export const HOSTILE_COMMAND = HOSTILE_LINES.map((l) => `printf '%s\\n' '${l}'; printf '%s\\n' '${l}' >&2`).join('; ');

/** What each stream shows. */
export const HOSTILE_OUTPUT = HOSTILE_LINES.map((l) => `${l}\n`).join('');
