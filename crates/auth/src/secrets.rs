//! Opaque secrets (API keys and the other prefixed tokens: 256 random bits, stored as SHA-256),
//! PKCE, constant-time comparison, and Argon2id passwords.

use argon2::Argon2;
use argon2::password_hash::{PasswordHasher, PasswordVerifier, phc::PasswordHash};
use rand::Rng;
use rand::distr::Alphanumeric;
use sha2::{Digest, Sha256};

/// Every plantd API key starts with this, so that secret scanners and people recognise it.
pub const KEY_PREFIX: &str = "pdk_";
/// Characters of the secret shown in lists (`pdk_` plus 8): enough to tell keys apart, far too
/// few to guess the rest (43 random base62 characters, about 256 bits).
pub const DISPLAY_PREFIX_LEN: usize = 12;
const RANDOM_LEN: usize = 43;

/// A freshly generated API key secret with what is stored of it.
pub struct NewKeySecret {
    /// The whole secret: shown once, never stored.
    pub secret: String,
    /// Hex SHA-256 of the secret: what the store keeps and looks up.
    pub hash: String,
    /// The non-secret beginning shown in lists.
    pub display_prefix: String,
}

pub fn generate_key() -> NewKeySecret {
    generate_secret(KEY_PREFIX)
}

/// Prefixes of the other opaque secrets, so that a leaked one is recognised for what it is.
pub const SESSION_PREFIX: &str = "pds_";
pub const REFRESH_PREFIX: &str = "pdr_";
pub const CODE_PREFIX: &str = "pdc_";
pub const CLIENT_SECRET_PREFIX: &str = "pdcs_";
pub const INVITATION_PREFIX: &str = "pdi_";
pub const RESET_PREFIX: &str = "pdp_";
/// A device's MQTT password.
pub const DEVICE_PASSWORD_PREFIX: &str = "pdm_";
/// An enrollment token, with which a device registers itself.
pub const ENROLLMENT_PREFIX: &str = "pde_";

/// A random secret: `prefix` and 43 base62 characters (about 256 bits), with its hash.
pub fn generate_secret(prefix: &str) -> NewKeySecret {
    let random: String = rand::rng()
        .sample_iter(&Alphanumeric)
        .take(RANDOM_LEN)
        .map(char::from)
        .collect();
    let secret = format!("{prefix}{random}");
    NewKeySecret {
        hash: hash_key(&secret),
        display_prefix: secret[..prefix.len() + 8].to_string(),
        secret,
    }
}

/// Whether a PKCE `code_verifier` (RFC 7636: 43 to 128 unreserved characters) matches the
/// S256 `code_challenge`: base64url(SHA-256(verifier)) without padding.
pub fn pkce_matches(verifier: &str, challenge: &str) -> bool {
    use base64::Engine;
    let well_formed = (43..=128).contains(&verifier.len())
        && verifier
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b));
    let computed = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(Sha256::digest(verifier.as_bytes()));
    well_formed && equal_in_constant_time(computed.as_bytes(), challenge.as_bytes())
}

/// Compares two secrets (or their hashes) without leaking, by timing, where they differ.
pub fn equal_in_constant_time(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The stored form of a key secret. A fast hash is right here: the secret has 256 bits of
/// entropy, so it cannot be brute-forced, and every request must be checked quickly.
pub fn hash_key(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// Whether a bearer token looks like a plantd API key (and not, say, a JWT).
pub fn looks_like_key(token: &str) -> bool {
    token.starts_with(KEY_PREFIX) && token.len() == KEY_PREFIX.len() + RANDOM_LEN
}

#[derive(Debug, thiserror::Error)]
#[error("password hashing failed")]
pub struct PasswordError(#[source] argon2::password_hash::Error);

/// Argon2id PHC string of a password, with a random salt.
pub fn hash_password(password: &str) -> Result<String, PasswordError> {
    Argon2::default()
        .hash_password(password.as_bytes())
        .map(|h| h.to_string())
        .map_err(PasswordError)
}

/// Whether `password` matches a stored PHC string; a malformed stored hash never matches.
pub fn verify_password(password: &str, phc: &str) -> bool {
    PasswordHash::new(phc).is_ok_and(|h| {
        Argon2::default()
            .verify_password(password.as_bytes(), &h)
            .is_ok()
    })
}

/// A random password for generated accounts (first start): 20 base62 characters.
pub fn generate_password() -> String {
    rand::rng()
        .sample_iter(&Alphanumeric)
        .take(20)
        .map(char::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_prefixed_unique_and_hashed() {
        let a = generate_key();
        let b = generate_key();
        assert!(a.secret.starts_with("pdk_") && looks_like_key(&a.secret));
        assert_ne!(a.secret, b.secret);
        assert_eq!(a.hash, hash_key(&a.secret));
        assert_eq!(a.hash.len(), 64);
        assert!(a.secret.starts_with(&a.display_prefix));
        assert!(!looks_like_key("eyJhbGciOi.x.y"));
        let s = generate_secret(SESSION_PREFIX);
        assert!(s.secret.starts_with("pds_") && s.secret.len() == 47);
        assert_eq!(s.display_prefix.len(), 12);
    }

    #[test]
    fn pkce_s256_as_in_rfc_7636_appendix_b() {
        let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
        let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
        assert!(pkce_matches(verifier, challenge));
        assert!(!pkce_matches(
            verifier,
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cN"
        ));
        assert!(!pkce_matches("short", challenge));
        assert!(!pkce_matches(verifier, verifier), "plain is not S256");
    }

    #[test]
    fn passwords_use_argon2id_and_verify() {
        let h = hash_password("correct horse").unwrap();
        assert!(h.starts_with("$argon2id$"));
        assert!(verify_password("correct horse", &h));
        assert!(!verify_password("wrong", &h));
        assert!(!verify_password("x", "not-a-hash"));
        assert_ne!(h, hash_password("correct horse").unwrap(), "salts differ");
    }
}
