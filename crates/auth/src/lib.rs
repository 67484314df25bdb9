//! Secrets: API keys and other opaque tokens (a recognisable prefix and 256 random bits, stored
//! as SHA-256), user passwords (Argon2id PHC strings, and the rules a new one must meet), PKCE,
//! and RS256 access tokens ([`jwt`]).

pub mod jwt;
pub mod license_key;
mod password_rules;

pub use password_rules::{MAX_PASSWORD_BYTES, MIN_PASSWORD_CHARS, password_problem};
mod secrets;

pub use secrets::{
    CLIENT_SECRET_PREFIX, CODE_PREFIX, DEVICE_PASSWORD_PREFIX, DISPLAY_PREFIX_LEN,
    ENROLLMENT_PREFIX, INVITATION_PREFIX, KEY_PREFIX, NewKeySecret, PasswordError, REFRESH_PREFIX,
    RESET_PREFIX, SESSION_PREFIX, equal_in_constant_time, generate_key, generate_password,
    generate_secret, hash_key, hash_password, looks_like_key, pkce_matches, verify_password,
};
