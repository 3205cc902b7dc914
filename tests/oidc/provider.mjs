// node-oidc-provider, as tests/oauth.rs starts it: an identity provider with resource indicators
// (RFC 8707) that issues JWT access tokens (RFC 9068) for the resource a client names, through
// the client credentials grant, or the authorization code grant with its development sign-in
// and consent pages (any login, any password), which a test drives over plain HTTP.
//
//   node provider.mjs <port, 0 for any> <keys.json> <kid,kid,...>
//
// The keys are ES256, the first kid signing; each kid's key is kept in keys.json, so a provider
// restarted with "new,old" signs with a new key and still publishes the old one (a rotation).
// Prints `ready <issuer>` once it listens.
import { generateKeyPairSync } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import Provider from 'oidc-provider';

const [port, keysFile, kids] = process.argv.slice(2);
const stored = existsSync(keysFile) ? JSON.parse(readFileSync(keysFile, 'utf8')) : {};
const key = (kid, type, options, alg) => {
  if (!stored[kid]) {
    const { privateKey } = generateKeyPairSync(type, options);
    stored[kid] = { ...privateKey.export({ format: 'jwk' }), kid, alg, use: 'sig' };
  }
  return stored[kid];
};
const keys = kids.split(',').map((kid) => key(kid, 'ec', { namedCurve: 'P-256' }, 'ES256'));
// ID tokens default to RS256: the provider wants a key for it, though no ID token is issued here.
keys.push(key('id-tokens', 'rsa', { modulusLength: 2048 }, 'RS256'));
writeFileSync(keysFile, JSON.stringify(stored));

const server = (await import('node:http')).createServer();
await new Promise((resolve) => server.listen(Number(port), '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  clients: [{
    client_id: 'agent',
    client_secret: 'agent-secret-0123456789abcdef0123456789',
    grant_types: ['client_credentials'],
    redirect_uris: [],
    response_types: [],
  }, {
    // rmcp's client sends its credentials in the body (client_secret_post).
    client_id: 'mcp-host',
    client_secret: 'mcp-host-secret-0123456789abcdef012345',
    grant_types: ['client_credentials'],
    redirect_uris: [],
    response_types: [],
    token_endpoint_auth_method: 'client_secret_post',
  }, {
    // A host signing a user in through the browser: authorization code with PKCE, a public
    // client with a loopback redirect (RFC 8252).
    client_id: 'browser-host',
    application_type: 'native',
    grant_types: ['authorization_code'],
    response_types: ['code'],
    redirect_uris: ['http://127.0.0.1/callback'],
    token_endpoint_auth_method: 'none',
  }],
  jwks: { keys },
  features: {
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      // Whatever resource a client names: that URL is the token's audience.
      getResourceServerInfo: () => ({
        scope: 'tools files:write',
        accessTokenFormat: 'jwt',
        accessTokenTTL: 300,
        jwt: { sign: { alg: 'ES256' } },
      }),
    },
  },
});
server.on('request', provider.callback());
console.log(`ready ${issuer}`);
