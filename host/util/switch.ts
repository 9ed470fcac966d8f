// What an on/off environment variable means, once for every reader: the server's configuration
// (which refuses a value that is neither) and processes that only read one (which take it as off).

/** 1 or true (any case) is true; unset, empty, 0 or false is false; anything else is undefined. */
export function switchValue(value: string | undefined): boolean | undefined {
  const text = (value ?? '').toLowerCase();
  if (text === '' || text === '0' || text === 'false') return false;
  if (text === '1' || text === 'true') return true;
  return undefined;
}
