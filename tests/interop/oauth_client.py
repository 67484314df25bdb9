"""Independent OAuth 2.0 clients against plantd: authlib and PyJWT (not plantd's code).

Usage: oauth_client.py ROOT SPA_CLIENT_ID WEB_CLIENT_ID WEB_SECRET EMAIL PASSWORD REDIRECT_URI

1. authlib runs the authorization code flow with PKCE (S256) for the public SPA client,
   driving the login and consent forms with requests as a browser would, then exchanges the
   code, calls the API with the access token, refreshes (rotation) and checks that presenting
   the rotated refresh token is refused (invalid_grant).
2. PyJWT's PyJWKClient verifies the access token against /.well-known/jwks.json, checking
   aud, iss and exp.
3. authlib runs client credentials for the web client (client_secret_post) and calls the API.

Prints one line per step ("ok <step>") and exits non-zero on the first failure.
"""

import html.parser
import sys
import urllib.parse

import jwt
import requests
from authlib.integrations.requests_client import OAuth2Session
from authlib.common.security import generate_token

root, spa_id, web_id, web_secret, email, password, redirect_uri = sys.argv[1:8]
token_url = f"{root}/oauth/token"


class Form(html.parser.HTMLParser):
    """The hidden fields of the page's form."""

    def __init__(self):
        super().__init__()
        self.fields = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "input" and a.get("type") == "hidden":
            self.fields[a["name"]] = a.get("value", "")


def hidden_fields(page):
    f = Form()
    f.feed(page)
    return f.fields


def check(cond, what):
    if not cond:
        print(f"FAILED {what}", flush=True)
        sys.exit(1)


# 1. Code flow with PKCE, as a browser.
client = OAuth2Session(
    spa_id,
    scope="read:assets read:alerts",
    redirect_uri=redirect_uri,
    code_challenge_method="S256",
    token_endpoint_auth_method="none",
)
verifier = generate_token(64)
url, state = client.create_authorization_url(f"{root}/oauth/authorize", code_verifier=verifier)
browser = requests.Session()
origin = {"Origin": root}
page = browser.get(url)
check(page.status_code == 200 and 'name="password"' in page.text, "login page")
fields = hidden_fields(page.text)
fields.update({"email": email, "password": password})
r = browser.post(f"{root}/oauth/authorize", data=fields, headers=origin, allow_redirects=False)
check(r.status_code == 303 and "plantd_session" in browser.cookies, f"login form: {r.status_code}")
consent = browser.get(urllib.parse.urljoin(root, r.headers["Location"]))
check(consent.status_code == 200 and "Allow" in consent.text, "consent page")
fields = hidden_fields(consent.text)
fields["action"] = "approve"
r = browser.post(f"{root}/oauth/authorize", data=fields, headers=origin, allow_redirects=False)
check(r.status_code == 303, f"approval: {r.status_code}")
callback = r.headers["Location"]
check(callback.startswith(redirect_uri), f"redirect to the client: {callback}")
token = client.fetch_token(token_url, authorization_response=callback, code_verifier=verifier)
check(token["token_type"] == "Bearer" and token["expires_in"] == 3600, "token response")
check(token["scope"] == "read:assets read:alerts", f"scope {token['scope']}")
print("ok authorization_code+pkce", flush=True)

me = requests.get(f"{root}/v1/users/me", headers={"Authorization": f"Bearer {token['access_token']}"})
check(me.status_code == 200 and me.json()["data"]["email"] == email, f"API call: {me.text}")
print("ok api_with_user_token", flush=True)

# 2. PyJWT verifies the token with the published keys.
jwks = jwt.PyJWKClient(f"{root}/.well-known/jwks.json")
key = jwks.get_signing_key_from_jwt(token["access_token"])
claims = jwt.decode(
    token["access_token"],
    key.key,
    algorithms=["RS256"],
    audience=root,
    issuer=root,
    options={"require": ["exp", "iat", "iss", "aud", "sub"]},
)
check(claims["scope"] == "read:assets read:alerts" and claims["org"], f"claims {claims}")
check(claims["exp"] - claims["iat"] == 3600, "one hour")
try:
    jwt.decode(token["access_token"], key.key, algorithms=["RS256"], audience="https://other.example", issuer=root)
    check(False, "a wrong audience must fail")
except jwt.InvalidAudienceError:
    pass
print("ok pyjwt_jwks_verification", flush=True)

old_refresh = token["refresh_token"]
renewed = client.refresh_token(token_url, refresh_token=old_refresh)
check(renewed["refresh_token"] != old_refresh, "rotation")
replay = requests.post(token_url, data={"grant_type": "refresh_token", "refresh_token": old_refresh, "client_id": spa_id})
check(replay.status_code == 400 and replay.json()["error"] == "invalid_grant", f"replay: {replay.text}")
print("ok refresh_rotation", flush=True)

# 3. Client credentials with client_secret_post.
service = OAuth2Session(web_id, web_secret, token_endpoint_auth_method="client_secret_post")
cc = service.fetch_token(token_url, grant_type="client_credentials", scope="read:assets")
check("refresh_token" not in cc and cc["scope"] == "read:assets", f"client credentials: {cc}")
r = requests.get(f"{root}/v1/data-sources", headers={"Authorization": f"Bearer {cc['access_token']}"})
check(r.status_code == 200, f"API call: {r.text}")
r = requests.get(f"{root}/v1/api-keys", headers={"Authorization": f"Bearer {cc['access_token']}"})
check(r.status_code == 403 and r.json()["error"] == "insufficient_scope", f"scope refusal: {r.text}")
print("ok client_credentials", flush=True)
