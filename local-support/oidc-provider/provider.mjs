// A certified OpenID Provider (panva's oidc-provider) on 127.0.0.1, set up
// as its operator's guide says for an API of JWT access tokens: the API is
// a resource server (RFC 8707) whose access tokens are JWTs (RFC 9068,
// `typ` at+jwt, `aud` API) granting plants/read and plants/write; one
// confidential client with the authorization-code flow (PKCE) and client
// credentials; an RSA signing key made at each start. Any login signs in
// (its development interactions). Prints "ready" once it listens.
//   node provider.mjs PORT API
import Provider from "oidc-provider";
import { generateKeyPairSync, randomUUID } from "node:crypto";

const [port, api] = process.argv.slice(2);
const issuer = `http://127.0.0.1:${port}`;
const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
const key = { ...privateKey.export({ format: "jwk" }), kid: randomUUID(), use: "sig", alg: "RS256" };
const provider = new Provider(issuer, {
  jwks: { keys: [key] },
  clients: [{
    client_id: "plants-app",
    client_secret: "plants-app-secret",
    grant_types: ["authorization_code", "client_credentials"],
    redirect_uris: [`${issuer}/callback`],
    scope: "openid plants/read plants/write",
  }],
  scopes: ["openid", "plants/read", "plants/write"],
  findAccount: (_, sub) => ({ accountId: sub, claims: () => ({ sub }) }),
  features: {
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => api,
      useGrantedResource: () => true,
      getResourceServerInfo: () => ({ scope: "plants/read plants/write", accessTokenFormat: "jwt" }),
    },
  },
});
provider.listen(Number(port), "127.0.0.1", () => console.log("ready"));
