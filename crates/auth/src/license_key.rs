//! License keys (issue 16): an Ed25519-signed token a device checks with no network.
//!
//! A key is `pdl_` followed by the unpadded base64url of `payload || signature`, where the
//! signature (64 bytes, Ed25519 over the payload bytes) is always the last 64 bytes and the
//! payload (version 1) is:
//!
//! | bytes | field |
//! |---|---|
//! | 1 | version, `1` |
//! | 16 | license id (UUID) |
//! | 16 | product id (UUID) |
//! | 8 | expiry, Unix seconds, big-endian signed; `0` for a perpetual license |
//! | 1 | number of features |
//! | 1 + n, each | a feature: its length and its UTF-8 name |
//!
//! Binary rather than JSON so that a key with a few features stays near 170 characters. Each
//! organization signs with its own key pair: a vendor's devices trust only its public key.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::pkcs8::{DecodePublicKey, EncodePublicKey, spki::der::pem::LineEnding};
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use rand::RngCore;
use uuid::Uuid;

/// Every license key starts with this.
pub const LICENSE_PREFIX: &str = "pdl_";
const VERSION: u8 = 1;
const SIGNATURE_LEN: usize = 64;
/// Version, two ids, expiry and the feature count.
const FIXED_LEN: usize = 1 + 16 + 16 + 8 + 1;
/// The longest key text accepted for decoding (far above any key plantd issues).
const MAX_KEY_LEN: usize = 8192;

/// What a license key carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LicenseClaims {
    pub license_id: Uuid,
    pub product_id: Uuid,
    /// Unix seconds; `None` for a perpetual license.
    pub expires_at: Option<i64>,
    pub features: Vec<String>,
}

/// Why a key is refused.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("not a plantd license key (it must start with '{LICENSE_PREFIX}')")]
    Prefix,
    #[error("the license key is damaged: {0}")]
    Malformed(&'static str),
    #[error("the license key's signature does not verify with this public key")]
    Signature,
    #[error("the public key is not an Ed25519 public key")]
    PublicKey(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("a feature name is longer than 255 bytes or there are more than 255 features")]
    TooLarge,
}

/// An organization's signing key pair, from its 32-byte seed.
pub struct LicenseSigner {
    key: SigningKey,
}

impl LicenseSigner {
    /// A new random key pair; keep [`LicenseSigner::seed`] secret.
    pub fn generate() -> Self {
        let mut seed = [0u8; 32];
        rand::rng().fill_bytes(&mut seed);
        Self {
            key: SigningKey::from_bytes(&seed),
        }
    }

    pub fn from_seed(seed: &[u8]) -> Result<Self, KeyError> {
        let seed: [u8; 32] = seed
            .try_into()
            .map_err(|_| KeyError::Malformed("a signing seed is 32 bytes"))?;
        Ok(Self {
            key: SigningKey::from_bytes(&seed),
        })
    }

    pub fn seed(&self) -> [u8; 32] {
        self.key.to_bytes()
    }

    pub fn public_key(&self) -> [u8; 32] {
        self.key.verifying_key().to_bytes()
    }

    /// The Ed25519 signature of `message` (an OTA package's manifest): any holder of the public
    /// key checks it with a standard Ed25519 verifier.
    pub fn sign_message(&self, message: &[u8]) -> [u8; 64] {
        self.key.sign(message).to_bytes()
    }

    /// The key text for `claims`.
    pub fn sign(&self, claims: &LicenseClaims) -> Result<String, KeyError> {
        let mut bytes = encode(claims)?;
        let signature = self.key.sign(&bytes);
        bytes.extend_from_slice(&signature.to_bytes());
        Ok(format!("{LICENSE_PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes)))
    }
}

/// Whether `signature` is `public_key`'s Ed25519 signature of `message` (what a device does
/// with an OTA manifest).
pub fn verify_message(public_key: &[u8; 32], message: &[u8], signature: &[u8]) -> bool {
    let (Ok(key), Ok(signature)) = (
        VerifyingKey::from_bytes(public_key),
        Signature::from_slice(signature),
    ) else {
        return false;
    };
    key.verify(message, &signature).is_ok()
}

/// The public key as PEM (SubjectPublicKeyInfo, `-----BEGIN PUBLIC KEY-----`), the form
/// OpenSSL and python's `cryptography` load.
pub fn public_key_pem(public_key: &[u8; 32]) -> Result<String, KeyError> {
    VerifyingKey::from_bytes(public_key)
        .map_err(|e| KeyError::PublicKey(e.into()))?
        .to_public_key_pem(LineEnding::LF)
        .map_err(|e| KeyError::PublicKey(e.into()))
}

/// Reads a public key given as PEM or as the base64 of its 32 bytes.
pub fn parse_public_key(text: &str) -> Result<[u8; 32], KeyError> {
    let text = text.trim();
    if text.starts_with("-----BEGIN") {
        return VerifyingKey::from_public_key_pem(text)
            .map(|k| k.to_bytes())
            .map_err(|e| KeyError::PublicKey(e.into()));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .or_else(|_| URL_SAFE_NO_PAD.decode(text))
        .map_err(|_| KeyError::PublicKey("neither PEM nor base64".into()))?;
    bytes
        .try_into()
        .map_err(|_| KeyError::PublicKey("an Ed25519 public key is 32 bytes".into()))
}

/// A key split into its claims, the signed bytes and the signature, not yet verified.
pub struct UnverifiedKey {
    pub claims: LicenseClaims,
    signed: Vec<u8>,
    signature: Signature,
}

impl UnverifiedKey {
    /// Checks the signature with `public_key`.
    pub fn verify(&self, public_key: &[u8; 32]) -> Result<&LicenseClaims, KeyError> {
        let key =
            VerifyingKey::from_bytes(public_key).map_err(|e| KeyError::PublicKey(e.into()))?;
        key.verify(&self.signed, &self.signature)
            .map_err(|_| KeyError::Signature)?;
        Ok(&self.claims)
    }
}

/// Decodes a key's text (no signature check: see [`UnverifiedKey::verify`]).
pub fn decode(key: &str) -> Result<UnverifiedKey, KeyError> {
    let body = key
        .trim()
        .strip_prefix(LICENSE_PREFIX)
        .ok_or(KeyError::Prefix)?;
    if body.len() > MAX_KEY_LEN {
        return Err(KeyError::Malformed("too long"));
    }
    let mut bytes = URL_SAFE_NO_PAD
        .decode(body)
        .map_err(|_| KeyError::Malformed("not base64url"))?;
    if bytes.len() < FIXED_LEN + SIGNATURE_LEN {
        return Err(KeyError::Malformed("too short"));
    }
    let signature = bytes.split_off(bytes.len() - SIGNATURE_LEN);
    let signature =
        Signature::from_slice(&signature).map_err(|_| KeyError::Malformed("signature"))?;
    let claims = parse(&bytes)?;
    Ok(UnverifiedKey {
        claims,
        signed: bytes,
        signature,
    })
}

/// Decodes and verifies a key with `public_key`: what a device does offline.
pub fn verify(key: &str, public_key: &[u8; 32]) -> Result<LicenseClaims, KeyError> {
    let unverified = decode(key)?;
    unverified.verify(public_key)?;
    Ok(unverified.claims)
}

fn encode(c: &LicenseClaims) -> Result<Vec<u8>, KeyError> {
    let mut out =
        Vec::with_capacity(FIXED_LEN + c.features.iter().map(|f| f.len() + 1).sum::<usize>());
    out.push(VERSION);
    out.extend_from_slice(c.license_id.as_bytes());
    out.extend_from_slice(c.product_id.as_bytes());
    out.extend_from_slice(&c.expires_at.unwrap_or(0).to_be_bytes());
    out.push(u8::try_from(c.features.len()).map_err(|_| KeyError::TooLarge)?);
    for f in &c.features {
        out.push(u8::try_from(f.len()).map_err(|_| KeyError::TooLarge)?);
        out.extend_from_slice(f.as_bytes());
    }
    Ok(out)
}

fn parse(bytes: &[u8]) -> Result<LicenseClaims, KeyError> {
    if bytes[0] != VERSION {
        return Err(KeyError::Malformed("unknown version"));
    }
    let id = |at: usize| Uuid::from_slice(&bytes[at..at + 16]).expect("16 bytes");
    let expiry = i64::from_be_bytes(bytes[33..41].try_into().expect("8 bytes"));
    let count = bytes[41] as usize;
    let mut rest = &bytes[FIXED_LEN..];
    let mut features = Vec::with_capacity(count);
    for _ in 0..count {
        let (&len, tail) = rest
            .split_first()
            .ok_or(KeyError::Malformed("features cut short"))?;
        let name = tail
            .get(..len as usize)
            .ok_or(KeyError::Malformed("features cut short"))?;
        let name =
            std::str::from_utf8(name).map_err(|_| KeyError::Malformed("a feature is not UTF-8"))?;
        features.push(name.to_string());
        rest = &tail[len as usize..];
    }
    if !rest.is_empty() {
        return Err(KeyError::Malformed("bytes after the features"));
    }
    Ok(LicenseClaims {
        license_id: id(1),
        product_id: id(17),
        expires_at: (expiry != 0).then_some(expiry),
        features,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims() -> LicenseClaims {
        LicenseClaims {
            license_id: Uuid::now_v7(),
            product_id: Uuid::now_v7(),
            expires_at: Some(1_800_000_000),
            features: vec!["mqtt".into(), "opcua".into(), "modbus".into()],
        }
    }

    #[test]
    fn signs_and_verifies_offline() {
        let signer = LicenseSigner::generate();
        let key = signer.sign(&claims()).unwrap();
        assert!(key.starts_with(LICENSE_PREFIX));
        assert!(key.len() < 200, "{} characters", key.len());
        let pem = public_key_pem(&signer.public_key()).unwrap();
        let public = parse_public_key(&pem).unwrap();
        assert_eq!(verify(&key, &public).unwrap(), claims_of(&key));
        // The same key pair from its seed signs the same bytes (Ed25519 is deterministic).
        let again = LicenseSigner::from_seed(&signer.seed()).unwrap();
        assert_eq!(again.sign(&claims_of(&key)).unwrap(), key);
        let perpetual = LicenseClaims {
            expires_at: None,
            features: vec![],
            ..claims()
        };
        let k = signer.sign(&perpetual).unwrap();
        assert_eq!(verify(&k, &public).unwrap(), perpetual);
    }

    fn claims_of(key: &str) -> LicenseClaims {
        decode(key).unwrap().claims
    }

    #[test]
    fn tampering_and_other_keys_fail() {
        let signer = LicenseSigner::generate();
        let public = signer.public_key();
        let key = signer.sign(&claims()).unwrap();
        // Change one character of the payload (a feature letter), keeping valid base64url.
        let mut bytes = URL_SAFE_NO_PAD.decode(&key[4..]).unwrap();
        bytes[43] ^= 0x01;
        let tampered = format!("{LICENSE_PREFIX}{}", URL_SAFE_NO_PAD.encode(&bytes));
        assert!(matches!(
            verify(&tampered, &public),
            Err(KeyError::Signature)
        ));
        // Another organization's key pair.
        let other = LicenseSigner::generate().public_key();
        assert!(matches!(verify(&key, &other), Err(KeyError::Signature)));
        assert!(matches!(verify("pdk_abc", &public), Err(KeyError::Prefix)));
        for bad in ["pdl_", "pdl_!!!", "pdl_AAAA", &key[..key.len() - 10]] {
            assert!(
                matches!(
                    verify(bad, &public),
                    Err(KeyError::Malformed(_) | KeyError::Signature)
                ),
                "{bad}"
            );
        }
        // Feature bytes that run past the end are refused, not a panic.
        let mut c = claims();
        c.features = vec!["x".repeat(255)];
        let long = signer.sign(&c).unwrap();
        let mut bytes = URL_SAFE_NO_PAD.decode(&long[4..]).unwrap();
        bytes.truncate(60);
        bytes.extend_from_slice(&[0u8; 64]);
        let cut = format!("{LICENSE_PREFIX}{}", URL_SAFE_NO_PAD.encode(&bytes));
        assert!(matches!(decode(&cut).err(), Some(KeyError::Malformed(_))));
        assert!(parse_public_key("not a key").is_err());
    }
}
