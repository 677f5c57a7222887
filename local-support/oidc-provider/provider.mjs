// A certified OpenID Provider (panva's oidc-provider) on 127.0.0.1, set up
// as its guide says for an API of JWT access tokens: the API a resource
// server (RFC 8707) whose tokens are JWTs (RFC 9068) granting plants/read
// and plants/write; one confidential client with both grants; an RSA key
// made at start; any login signs in (development interactions). Once it
// listens, a client gets tokens through both flows and prints them as one
// JSON line.   node provider.mjs PORT API
import Provider from "oidc-provider";
import { createHash, generateKeyPairSync, randomBytes, randomUUID } from "node:crypto";

const [port, api] = process.argv.slice(2);
const issuer = `http://127.0.0.1:${port}`;
const client = { id: "plants-app", secret: "plants-app-secret", callback: `${issuer}/callback` };
const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
const key = { ...privateKey.export({ format: "jwk" }), kid: randomUUID(), use: "sig", alg: "RS256" };
const provider = new Provider(issuer, {
  jwks: { keys: [key] },
  clients: [{ client_id: client.id, client_secret: client.secret, redirect_uris: [client.callback],
    grant_types: ["authorization_code", "client_credentials"], scope: "openid plants/read plants/write" }],
  scopes: ["openid", "plants/read", "plants/write"],
  findAccount: (_, sub) => ({ accountId: sub, claims: () => ({ sub }) }),
  features: {
    clientCredentials: { enabled: true },
    resourceIndicators: { enabled: true, defaultResource: () => api, useGrantedResource: () => true,
      getResourceServerInfo: () => ({ scope: "plants/read plants/write", accessTokenFormat: "jwt" }) },
  },
});

const form = "application/x-www-form-urlencoded";
const basic = `Basic ${Buffer.from(`${client.id}:${client.secret}`).toString("base64")}`;
const token = async (grant) => (await fetch(`${issuer}/token`, { method: "POST",
  headers: { authorization: basic, "content-type": form }, body: new URLSearchParams(grant) })).json();

// alice signs in as a browser does (log-in, then consent, cookies kept
// across redirects); the client redeems the code with its PKCE verifier.
async function signIn() {
  const verifier = randomBytes(32).toString("base64url");
  const code_challenge = createHash("sha256").update(verifier).digest("base64url");
  const query = new URLSearchParams({ client_id: client.id, response_type: "code", code_challenge,
    code_challenge_method: "S256", redirect_uri: client.callback, scope: "openid plants/read plants/write" });
  let [url, body, cookies] = [`${issuer}/auth?${query}`, undefined, new Map()];
  while (!url.startsWith(client.callback)) {
    const cookie = [...cookies].map(([name, value]) => `${name}=${value}`).join("; ");
    const headers = { cookie, "content-type": form };
    const response = await fetch(url, { method: body ? "POST" : "GET", headers, body, redirect: "manual" });
    for (const set of response.headers.getSetCookie()) {
      const [pair] = set.split(";");
      cookies.set(pair.slice(0, pair.indexOf("=")), pair.slice(pair.indexOf("=") + 1));
    }
    const [location, page] = [response.headers.get("location"), await response.text()];
    body = location ? undefined : page.includes('value="login"') ? "prompt=login&login=alice&password=any" : "prompt=consent";
    url = location ? new URL(location, issuer).href : url;
  }
  const code = new URL(url).searchParams.get("code");
  return token({ grant_type: "authorization_code", code, redirect_uri: client.callback, code_verifier: verifier });
}

provider.listen(Number(port), "127.0.0.1", async () => {
  const machine = await token({ grant_type: "client_credentials", scope: "plants/read plants/write" });
  const alice = await signIn();
  console.log(JSON.stringify({ machine: machine.access_token, access: alice.access_token, id: alice.id_token }));
});
