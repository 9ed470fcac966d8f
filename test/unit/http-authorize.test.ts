// Who may use the HTTP transport's endpoint: authorize, a pure function of the request's head, the
// allowed Host names and the token table, asserted branch by branch (the e2e http tests drive the
// same checks through the built server).
import { describe, expect, it } from 'vitest';
import { OPERATOR } from '../../host/access/principal.js';
import { hashToken, parseTokensFile, TokenTable } from '../../host/access/tokens-file.js';
import { allowedHosts, authorize, UNAUTHORIZED, type RequestHead } from '../../host/mcp/transports/http.js';

const TOKEN = 'operator-token-0123456789';
const hosts = allowedHosts('127.0.0.1', 8765, ['sandbox.example']);
const operatorTokens = TokenTable.single(TOKEN);

/** A request head that passes every check, with `headers` changed (undefined removes one). */
function head(headers: Record<string, string | undefined> = {}, url = '/mcp'): RequestHead {
  const all: Record<string, string | undefined> = { host: '127.0.0.1:8765', authorization: `Bearer ${TOKEN}`, ...headers };
  return { url, headers: Object.fromEntries(Object.entries(all).filter(([, v]) => v !== undefined)) };
}

function refusalOf(req: RequestHead, tokens = operatorTokens) {
  const who = authorize(req, hosts, tokens);
  if (!('refusal' in who)) throw new Error('expected a refusal');
  return who.refusal;
}

describe('authorize', () => {
  it('admits a request naming an allowed Host with a known token, as the token’s principal', () => {
    expect(authorize(head(), hosts, operatorTokens)).toEqual({ principal: OPERATOR });
    // Host names are case-insensitive; a query string does not change the path.
    expect(authorize(head({ host: 'LOCALHOST:8765' }, '/mcp?x=1'), hosts, operatorTokens)).toEqual({ principal: OPERATOR });
    expect(authorize(head({ host: 'sandbox.example:8765' }), hosts, operatorTokens)).toEqual({ principal: OPERATOR });
  });

  it('refuses a missing or foreign Host with 403 before anything else', () => {
    for (const host of [undefined, 'evil.example:8765', '127.0.0.1:1', 'sandbox.example']) {
      const refusal = refusalOf(head({ host, authorization: undefined }, '/elsewhere'));
      expect(refusal.status, String(host)).toBe(403);
      expect(refusal.message).toMatch(/Host header/);
    }
  });

  it('refuses a foreign Origin with 403, and takes any allowed name as Origin', () => {
    for (const origin of ['http://evil.example', 'https://127.0.0.1:8765', 'http://sandbox.example:1', 'null']) {
      const refusal = refusalOf(head({ origin, authorization: undefined }));
      expect(refusal.status, origin).toBe(403);
      expect(refusal.message).toMatch(/Origin/);
    }
    for (const origin of ['http://127.0.0.1:8765', 'http://localhost:8765', 'http://SANDBOX.example:8765']) {
      expect(authorize(head({ origin }), hosts, operatorTokens), origin).toEqual({ principal: OPERATOR });
    }
  });

  it('on port 80 takes a Host and Origin without the port (clients leave the default port out)', () => {
    const port80 = allowedHosts('127.0.0.1', 80, ['sandbox.example', 'proxy.example:80']);
    const admit = (headers: Record<string, string>) => authorize(head(headers), port80, operatorTokens);
    for (const host of ['127.0.0.1', 'localhost', '[::1]', 'sandbox.example', 'proxy.example', '127.0.0.1:80']) {
      expect(admit({ host }), host).toEqual({ principal: OPERATOR });
    }
    expect(admit({ host: '127.0.0.1', origin: 'http://127.0.0.1' })).toEqual({ principal: OPERATOR });
    // Still only this server's names; and on any other port a bare name is another server.
    expect(admit({ host: 'evil.example' })).toMatchObject({ refusal: { status: 403 } });
    expect(admit({ host: '127.0.0.1', origin: 'http://evil.example' })).toMatchObject({ refusal: { status: 403 } });
    expect(allowedHosts('127.0.0.1', 8765, ['proxy.example:80']).has('127.0.0.1')).toBe(false);
  });

  it('refuses another path with 404, before looking at the token', () => {
    for (const url of ['/', '/mcp/', '/MCP', '/other?mcp']) {
      const refusal = refusalOf(head({ authorization: undefined }, url));
      expect(refusal.status, url).toBe(404);
      expect(refusal.message).toMatch(/\/mcp/);
    }
  });

  it('refuses a request without an Authorization header with 401, saying no token was sent', () => {
    const refusal = refusalOf(head({ authorization: undefined }));
    expect(refusal).toEqual({ status: 401, message: UNAUTHORIZED.missing, headers: { 'www-authenticate': 'Bearer' } });
  });

  it('refuses an Authorization header that is not "Bearer <token>" with 401, saying so without echoing it', () => {
    for (const authorization of ['', 'Basic c2VjcmV0LXZhbHVl', 'Bearer', 'Bearer  ', `Bearer ${TOKEN} extra`, TOKEN]) {
      const refusal = refusalOf(head({ authorization }));
      expect(refusal, authorization).toEqual({ status: 401, message: UNAUTHORIZED.malformed, headers: { 'www-authenticate': 'Bearer' } });
    }
  });

  it('refuses a token no principal holds with 401, saying it is not valid without echoing it', () => {
    for (const authorization of [
      'Bearer wrong-token-xyz',
      `Bearer ${TOKEN.toUpperCase()}`,
      `Bearer ${TOKEN}x`,
      `Bearer ${TOKEN.slice(1)}`,
    ]) {
      const refusal = refusalOf(head({ authorization }));
      expect(refusal, authorization).toEqual({ status: 401, message: UNAUTHORIZED.wrong, headers: { 'www-authenticate': 'Bearer' } });
    }
  });

  it('gives the three a different text each', () => {
    expect(new Set(Object.values(UNAUTHORIZED)).size).toBe(3);
  });

  it('takes the scheme in any case and spaces after it', () => {
    for (const authorization of [`bearer ${TOKEN}`, `BEARER ${TOKEN}`, `Bearer   ${TOKEN}`]) {
      expect(authorize(head({ authorization }), hosts, operatorTokens), authorization).toEqual({ principal: OPERATOR });
    }
  });

  it('answers the named principal a tokens file gives the token', () => {
    const alice = 'alice-token-0123456789';
    const ops = 'ops-token-0123456789ab';
    const tokens = TokenTable.named(parseTokensFile(`alice user ${hashToken(alice)}\nops admin ${hashToken(ops)}\n`));
    expect(authorize(head({ authorization: `Bearer ${alice}` }), hosts, tokens)).toEqual({
      principal: { kind: 'named', name: 'alice', role: 'user' },
    });
    expect(authorize(head({ authorization: `Bearer ${ops}` }), hosts, tokens)).toEqual({
      principal: { kind: 'named', name: 'ops', role: 'admin' },
    });
    expect(refusalOf(head(), tokens).status).toBe(401);
  });
});
