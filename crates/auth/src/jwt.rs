//! RS256 access tokens (SPEC 5.3, 2.15): RSA signing keys, their public JWKs, signing and
//! verifying claims. Which keys exist and which one signs is the application's business; this
//! module only does the cryptography, through `jsonwebtoken` and `rsa`.

use jsonwebtoken::jwk::{Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use rsa::pkcs8::{EncodePrivateKey, LineEnding};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// Seconds of clock difference allowed when checking `exp` (and `nbf`).
pub const LEEWAY_SECS: i64 = 30;

/// Bits of the RSA keys plantd generates.
pub const RSA_BITS: usize = 2048;

#[derive(Debug, thiserror::Error)]
pub enum JwtError {
    #[error("cannot create an RSA key")]
    KeyGeneration(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("the signing key is not usable")]
    BadKey(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("cannot sign the token")]
    Signing(#[source] jsonwebtoken::errors::Error),
}

/// The claims of a plantd access token.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct AccessClaims {
    pub iss: String,
    /// The user id; for client credentials, the client id.
    pub sub: String,
    /// The API origin the token is for.
    pub aud: String,
    pub exp: i64,
    pub iat: i64,
    pub jti: String,
    /// The organization id.
    pub org: String,
    /// Granted scopes, space separated.
    pub scope: String,
    /// The OAuth client the token was issued to.
    pub client_id: String,
    /// The grant (authorization or refresh family, or client-credentials issue) it belongs to:
    /// revoking the grant revokes the token.
    pub gid: String,
}

/// The JWT type (`typ`) of access tokens (RFC 9068).
const ACCESS_TYPE: &str = "at+jwt";
/// The JWT type of BI guest tokens: a token of one type is never accepted as the other.
pub const GUEST_TYPE: &str = "guest+jwt";

/// The claims of a BI guest token (docs/api.md, "Embedded dashboards"): who issued it, for
/// which organization, the dashboards it may show and its own row-level-security clauses.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct GuestClaims {
    pub iss: String,
    /// The user (else the API key) that issued it.
    pub sub: String,
    /// The embed API of the issuer (`{issuer}/v1/bi-embed`): an access token's audience differs.
    pub aud: String,
    pub exp: i64,
    pub iat: i64,
    pub jti: String,
    /// The organization id.
    pub org: String,
    pub resources: Vec<GuestResource>,
    #[serde(default)]
    pub rls: Vec<GuestRls>,
}

/// A resource a guest token opens: `{type: "dashboard", id}`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct GuestResource {
    #[serde(rename = "type")]
    pub kind: String,
    pub id: String,
}

/// A row-level-security clause a guest token carries, on one BI table or (`table` absent) on
/// every table its dashboards read.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct GuestRls {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    pub clause: String,
}

/// A new RSA private key as PKCS#8 PEM (slow: run it off the async threads).
pub fn generate_rsa_pem() -> Result<String, JwtError> {
    let mut rng = rsa::rand_core::OsRng;
    let key = rsa::RsaPrivateKey::new(&mut rng, RSA_BITS)
        .map_err(|e| JwtError::KeyGeneration(e.into()))?;
    key.to_pkcs8_pem(LineEnding::LF)
        .map(|pem| pem.to_string())
        .map_err(|e| JwtError::KeyGeneration(e.into()))
}

/// One signing key: its id, the private half for signing and the public half for checking
/// and for the JWKS.
#[derive(Clone)]
pub struct SigningKey {
    pub kid: String,
    encoding: EncodingKey,
    decoding: DecodingKey,
    jwk: Jwk,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("kid", &self.kid)
            .finish()
    }
}

impl SigningKey {
    pub fn from_pem(kid: &str, private_pem: &str) -> Result<Self, JwtError> {
        let encoding = EncodingKey::from_rsa_pem(private_pem.as_bytes())
            .map_err(|e| JwtError::BadKey(e.into()))?;
        let mut jwk = Jwk::from_encoding_key(&encoding, Algorithm::RS256)
            .map_err(|e| JwtError::BadKey(e.into()))?;
        jwk.common.key_id = Some(kid.to_string());
        jwk.common.public_key_use = Some(PublicKeyUse::Signature);
        jwk.common.key_algorithm = Some(KeyAlgorithm::RS256);
        let decoding = DecodingKey::from_jwk(&jwk).map_err(|e| JwtError::BadKey(e.into()))?;
        Ok(Self {
            kid: kid.to_string(),
            encoding,
            decoding,
            jwk,
        })
    }

    /// The public key as a JWK (with `kid`, `use: sig`, `alg: RS256`).
    pub fn jwk(&self) -> &Jwk {
        &self.jwk
    }

    pub fn sign(&self, claims: &AccessClaims) -> Result<String, JwtError> {
        self.sign_as(ACCESS_TYPE, claims)
    }

    /// Signs a BI guest token (type `guest+jwt`).
    pub fn sign_guest(&self, claims: &GuestClaims) -> Result<String, JwtError> {
        self.sign_as(GUEST_TYPE, claims)
    }

    fn sign_as<T: Serialize>(&self, typ: &str, claims: &T) -> Result<String, JwtError> {
        let mut header = Header::new(Algorithm::RS256);
        header.kid = Some(self.kid.clone());
        header.typ = Some(typ.into());
        jsonwebtoken::encode(&header, claims, &self.encoding).map_err(JwtError::Signing)
    }

    /// The claims of `token` if this key signed it for `issuer` and `audience` and it has not
    /// expired (no leeway beyond 30 s of clock skew); else why not, in words a client may see.
    pub fn verify(
        &self,
        token: &str,
        issuer: &str,
        audience: &str,
    ) -> Result<AccessClaims, String> {
        self.verify_as(token, issuer, audience, "access token", LEEWAY_SECS)
    }

    /// The claims of a guest token, checked as [`SigningKey::verify`] checks access tokens but
    /// with no leeway: a guest token lives minutes, and the servers of one deployment that
    /// issue and check it share their clocks.
    pub fn verify_guest(
        &self,
        token: &str,
        issuer: &str,
        audience: &str,
    ) -> Result<GuestClaims, String> {
        self.verify_as(token, issuer, audience, "guest token", 0)
    }

    fn verify_as<T: DeserializeOwned>(
        &self,
        token: &str,
        issuer: &str,
        audience: &str,
        what: &str,
        leeway_secs: i64,
    ) -> Result<T, String> {
        let mut v = Validation::new(Algorithm::RS256);
        v.leeway = leeway_secs as u64;
        v.set_issuer(&[issuer]);
        v.set_audience(&[audience]);
        v.set_required_spec_claims(&["exp", "iat", "iss", "aud", "sub"]);
        jsonwebtoken::decode::<T>(token, &self.decoding, &v)
            .map(|d| d.claims)
            .map_err(|e| {
                use jsonwebtoken::errors::ErrorKind;
                match e.kind() {
                    ErrorKind::ExpiredSignature => format!("the {what} has expired"),
                    ErrorKind::InvalidIssuer => format!("the {what} was issued by another server"),
                    ErrorKind::InvalidAudience => format!("the {what} is for another audience"),
                    ErrorKind::InvalidSignature => format!("the {what}'s signature is invalid"),
                    _ => format!("the {what} is invalid: {e}"),
                }
            })
    }
}

/// The key id (`kid`) a token's header names, if it is an access token at all: an RS256 JWT
/// of type `at+jwt` (RFC 9068 2.1: a JWT of another type, an ID token or a guest token say, is
/// no access token).
pub fn key_id_of(token: &str) -> Result<String, String> {
    key_id_typed(token, &[ACCESS_TYPE, "application/at+jwt"], "access token")
}

/// The key id a guest token's header names, if it is an RS256 JWT of type `guest+jwt`.
pub fn key_id_of_guest(token: &str) -> Result<String, String> {
    key_id_typed(token, &[GUEST_TYPE], "guest token")
}

fn key_id_typed(token: &str, types: &[&str], what: &str) -> Result<String, String> {
    let header = jsonwebtoken::decode_header(token)
        .map_err(|_| format!("the {what} is not a well-formed JWT"))?;
    if header.alg != Algorithm::RS256 {
        return Err(format!("{what}s of this server are signed with RS256"));
    }
    let typ = header
        .typ
        .as_deref()
        .unwrap_or_default()
        .to_ascii_lowercase();
    if !types.contains(&typ.as_str()) {
        let article = if what.starts_with(['a', 'e', 'i', 'o', 'u']) {
            "an"
        } else {
            "a"
        };
        return Err(format!(
            "the token is not {article} {what} (its type must be {})",
            types[0]
        ));
    }
    header
        .kid
        .ok_or_else(|| format!("the {what} names no signing key (kid)"))
}

/// Whether a bearer token has the shape of a JWT (three base64url parts).
pub fn looks_like_jwt(token: &str) -> bool {
    token.split('.').count() == 3 && token.starts_with("eyJ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(exp: i64) -> AccessClaims {
        AccessClaims {
            iss: "http://127.0.0.1:8000".into(),
            sub: "user-1".into(),
            aud: "http://127.0.0.1:8000".into(),
            exp,
            iat: 1,
            jti: "j".into(),
            org: "org-1".into(),
            scope: "read:assets".into(),
            client_id: "c".into(),
            gid: "g".into(),
        }
    }

    #[test]
    fn only_access_tokens_are_accepted() {
        let key = SigningKey::from_pem("k1", &generate_rsa_pem().unwrap()).unwrap();
        let token = key.sign(&claims(i64::MAX / 2)).unwrap();
        assert_eq!(key_id_of(&token).unwrap(), "k1");
        // The same claims and key in a plain JWT (`typ: JWT`, as an ID token would be).
        let mut header = Header::new(Algorithm::RS256);
        header.kid = Some("k1".into());
        header.typ = Some("JWT".into());
        let plain = jsonwebtoken::encode(&header, &claims(i64::MAX / 2), &key.encoding).unwrap();
        assert!(key_id_of(&plain).unwrap_err().contains("at+jwt"));
        assert!(key_id_of_guest(&token).unwrap_err().contains("guest+jwt"));
    }

    #[test]
    fn guest_tokens_are_not_access_tokens() {
        let key = SigningKey::from_pem("k1", &generate_rsa_pem().unwrap()).unwrap();
        let iss = "http://127.0.0.1:8000";
        let aud = "http://127.0.0.1:8000/v1/bi-embed";
        let guest = GuestClaims {
            iss: iss.into(),
            sub: "user-1".into(),
            aud: aud.into(),
            exp: 4_000_000_000,
            iat: 1,
            jti: "j".into(),
            org: "org-1".into(),
            resources: vec![GuestResource {
                kind: "dashboard".into(),
                id: "d1".into(),
            }],
            rls: vec![GuestRls {
                table: None,
                clause: "asset_id = 'p1'".into(),
            }],
        };
        let token = key.sign_guest(&guest).unwrap();
        assert_eq!(key_id_of_guest(&token).unwrap(), "k1");
        assert!(key_id_of(&token).unwrap_err().contains("at+jwt"));
        assert_eq!(key.verify_guest(&token, iss, aud).unwrap(), guest);
        // Its claims are no access token's either, whatever the header says.
        assert!(key.verify(&token, iss, aud).is_err());
        let expired = key
            .sign_guest(&GuestClaims {
                exp: 10,
                ..guest.clone()
            })
            .unwrap();
        assert!(
            key.verify_guest(&expired, iss, aud)
                .unwrap_err()
                .contains("guest token has expired")
        );
    }

    #[test]
    fn signs_verifies_and_refuses() {
        let key = SigningKey::from_pem("k1", &generate_rsa_pem().unwrap()).unwrap();
        let other = SigningKey::from_pem("k2", &generate_rsa_pem().unwrap()).unwrap();
        let far = 4_000_000_000;
        let token = key.sign(&claims(far)).unwrap();
        assert!(looks_like_jwt(&token));
        assert_eq!(key_id_of(&token).unwrap(), "k1");
        let iss = "http://127.0.0.1:8000";
        assert_eq!(key.verify(&token, iss, iss).unwrap(), claims(far));
        assert!(
            other
                .verify(&token, iss, iss)
                .unwrap_err()
                .contains("signature")
        );
        assert!(
            key.verify(&token, "http://x", iss)
                .unwrap_err()
                .contains("another server")
        );
        assert!(
            key.verify(&token, iss, "http://x")
                .unwrap_err()
                .contains("audience")
        );
        let old = key.sign(&claims(10)).unwrap();
        assert!(key.verify(&old, iss, iss).unwrap_err().contains("expired"));
        let mut parts: Vec<String> = token.split('.').map(str::to_string).collect();
        parts[1] = parts[1].replace('A', "B");
        assert!(key.verify(&parts.join("."), iss, iss).is_err());
        let jwk = serde_json::to_value(key.jwk()).unwrap();
        assert_eq!(jwk["kid"], "k1");
        assert_eq!(jwk["kty"], "RSA");
        assert_eq!(jwk["alg"], "RS256");
        assert_eq!(jwk["use"], "sig");
        assert!(jwk.get("d").is_none(), "no private part in the JWK");
    }
}
