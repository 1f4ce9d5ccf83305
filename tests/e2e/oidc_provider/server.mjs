// A real OpenID Provider for the sign-in tests: panva/oidc-provider (OpenID Certified),
// with its development login and consent pages. Started by tests/e2e/test_browser_sso.py
// on a loopback port; accounts are read from ACCOUNTS_FILE at every lookup, so a test
// changes a person's groups at the provider by rewriting that file.
import fs from "node:fs";
import Provider from "oidc-provider";

const port = Number(process.env.PORT);
const accountsFile = process.env.ACCOUNTS_FILE;
const client = JSON.parse(process.env.CLIENT_JSON);
const issuer = `http://127.0.0.1:${port}`;

const provider = new Provider(issuer, {
  clients: [client],
  // PKCE required (S256), as a provider for a company of five hundred would have it.
  pkce: { required: () => true },
  scopes: ["openid", "email", "profile", "groups"],
  claims: {
    openid: ["sub"],
    email: ["email", "email_verified"],
    profile: ["preferred_username", "name"],
    groups: ["groups"],
  },
  features: {
    devInteractions: { enabled: true },
    rpInitiatedLogout: { enabled: true },
  },
  cookies: { keys: ["leaseboard-test-only"] },
  async findAccount(ctx, id) {
    const accounts = JSON.parse(fs.readFileSync(accountsFile, "utf8"));
    const account = accounts[id];
    if (!account) return undefined;
    return { accountId: id, async claims() { return { sub: id, ...account }; } };
  },
});
provider.proxy = false;
provider.listen(port, "127.0.0.1", () => {
  console.log(`ready ${issuer}`);
});
