// A real OpenID provider for tests: the `oidc-provider` package (ESM-only) in its own Node
// process on loopback. Prints one JSON line {"issuer": …} when ready.
//
//   node test/support/oidc-provider.mjs [port] [redirect-uri,…]
//
// Clients: `statehouse-cli` (public, PKCE, native loopback redirects on any port),
// `other-client`, and `statehouse-web` (public, PKCE, a web client: the redirect URIs given,
// such as a server's https://127.0.0.1:PORT/oauth/terraform/callback, which the provider's
// rules for native clients do not allow). Any login name works at the dev login form; the account's claims are
// sub=<login>, email=<login>@example.com, email_verified=true (false for logins starting with
// "unverified"), groups=["platform", "<login>-group"].
//
// For negative tests it also serves POST /test/mint {claims, header?}: an ID token signed with
// this provider's real signing key (the one its JWKS publishes), with whatever claims the test
// wants (another audience, a wrong nonce, expired …). Never expose such a thing outside tests.
import { generateKeyPair, exportJWK, SignJWT, importJWK } from 'jose';
import Provider from 'oidc-provider';
import { createServer } from 'node:http';

const port = Number(process.argv[2] ?? 0);
const webRedirects = (process.argv[3] ?? '').split(',').filter((u) => u !== '');
const { privateKey } = await generateKeyPair('RS256', { extractable: true });
const signingJwk = {
  ...(await exportJWK(privateKey)),
  kid: 'test-rs256',
  alg: 'RS256',
  use: 'sig',
};

const server = createServer();
await new Promise((r) => server.listen(port, '127.0.0.1', r));
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: 'statehouse-cli',
      application_type: 'native',
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code'],
      response_types: ['code'],
      redirect_uris: ['http://127.0.0.1/callback'],
    },
    {
      client_id: 'other-client',
      application_type: 'native',
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code'],
      response_types: ['code'],
      redirect_uris: ['http://127.0.0.1/callback'],
    },
    ...(webRedirects.length > 0
      ? [
          {
            client_id: 'statehouse-web',
            application_type: 'web',
            token_endpoint_auth_method: 'none',
            grant_types: ['authorization_code'],
            response_types: ['code'],
            redirect_uris: webRedirects,
          },
        ]
      : []),
  ],
  jwks: { keys: [signingJwk] },
  pkce: { required: () => true },
  claims: { openid: ['sub'], email: ['email', 'email_verified'], groups: ['groups'] },
  scopes: ['openid', 'email', 'profile', 'groups', 'offline_access'],
  conformIdTokenClaims: false,
  features: { devInteractions: { enabled: true } },
  findAccount: (_ctx, id) => ({
    accountId: id,
    claims: () => ({
      sub: id,
      email: `${id}@example.com`,
      email_verified: !id.startsWith('unverified'),
      groups: ['platform', `${id}-group`],
    }),
  }),
  ttl: {
    IdToken: 600,
    AccessToken: 600,
    AuthorizationCode: 120,
    Session: 3600,
    Interaction: 600,
    Grant: 3600,
  },
});
provider.on('server_error', (_ctx, err) =>
  process.stderr.write(`oidc-provider error: ${err.stack}\n`),
);

const signingKey = await importJWK(signingJwk, 'RS256');
const callback = provider.callback();
server.on('request', async (req, res) => {
  if (req.method === 'POST' && req.url === '/test/mint') {
    let body = '';
    for await (const chunk of req) body += chunk;
    const { claims, header } = JSON.parse(body);
    const now = Math.floor(Date.now() / 1000);
    const token = await new SignJWT({ iss: issuer, iat: now, exp: now + 300, ...claims })
      .setProtectedHeader({ alg: 'RS256', kid: 'test-rs256', typ: 'JWT', ...header })
      .sign(signingKey);
    res
      .writeHead(200, { 'content-type': 'application/json' })
      .end(JSON.stringify({ id_token: token }));
    return;
  }
  callback(req, res);
});

process.stdout.write(`${JSON.stringify({ issuer })}\n`);
process.on('SIGTERM', () => server.close(() => process.exit(0)));
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
