// The supported Node.js range comes from package.json and is checked the way npm reads it.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { checkNodeVersion, satisfiesRange, supportedNodeRange } from '../../host/cli/doctor/node-version.js';

const RANGE = '>=20.18.1 <21 || >=22 <23 || >=24 <25 || >=26 <27';

describe('the supported Node.js range', () => {
  it("is package.json's engines.node", () => {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
    expect(supportedNodeRange()).toBe(pkg.engines.node);
    expect(supportedNodeRange()).toBe(RANGE);
  });

  it('admits 20.18.1+ of 20, and 22, 24 and 26 (the lines CI tests), and nothing else', () => {
    for (const v of ['20.18.1', '20.19.0', 'v20.20.2', '22.0.0', '22.23.5', '24.0.0', '24.22.3', '26.0.0', '26.12.1'])
      expect(satisfiesRange(v, RANGE), v).toBe(true);
    for (const v of ['18.20.0', '20.0.0', '20.18.0', '21.0.0', '21.7.3', '23.0.0', '25.0.0', '27.0.0', '28.1.0'])
      expect(satisfiesRange(v, RANGE), v).toBe(false);
  });

  it('reports a supported version as ok and an old one as a failure with the fix', () => {
    expect(checkNodeVersion('22.1.0', RANGE).status).toBe('ok');
    const old = checkNodeVersion('18.19.0', RANGE);
    expect(old.status).toBe('fail');
    expect(old.fix).toContain(RANGE);
  });

  it("suggests the range's two newest lines, so the fix never names a line the range dropped", () => {
    expect(checkNodeVersion('18.19.0', RANGE).fix).toMatch(/e\.g\. Node\.js 26 or 24, the newest LTS lines it names$/);
    expect(checkNodeVersion('18.19.0', '>=22 <23').fix).toMatch(/e\.g\. Node\.js 22, the newest LTS line it names$/);
    expect(checkNodeVersion('31.0.0', '<30').fix).toBe('install a supported Node.js (<30)');
  });
});
