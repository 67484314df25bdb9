//! What a new password must be (docs/api.md, "Passwords"), after NIST SP 800-63B: long enough,
//! not too long to hash, and not one of the 20,000 most common passwords (the list Django
//! ships, built by Royce Williams; `data/common-passwords.LICENSE`). No composition rules.

use std::collections::HashSet;
use std::sync::OnceLock;

pub const MIN_PASSWORD_CHARS: usize = 12;
pub const MAX_PASSWORD_BYTES: usize = 1024;

const COMMON: &str = include_str!("../data/common-passwords.txt");

fn common() -> &'static HashSet<&'static str> {
    static SET: OnceLock<HashSet<&'static str>> = OnceLock::new();
    SET.get_or_init(|| {
        COMMON
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect()
    })
}

/// Why `password` may not be used by the person with `email`, or `None` when it may.
pub fn password_problem(password: &str, email: &str) -> Option<String> {
    if password.chars().count() < MIN_PASSWORD_CHARS {
        return Some(format!(
            "must have at least {MIN_PASSWORD_CHARS} characters"
        ));
    }
    if password.len() > MAX_PASSWORD_BYTES {
        return Some(format!("must have at most {MAX_PASSWORD_BYTES} bytes"));
    }
    let lower = password.to_lowercase();
    if common().contains(lower.as_str()) {
        return Some("is one of the most common passwords; choose another".into());
    }
    let local = email.split('@').next().unwrap_or_default().to_lowercase();
    if local.chars().count() >= 4 && lower.contains(&local) || lower == email.to_lowercase() {
        return Some("must not contain your email address".into());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules() {
        assert!(password_problem("short", "a@b.c").unwrap().contains("12"));
        assert!(
            password_problem("qwertyuiop123", "a@b.c")
                .unwrap()
                .contains("common")
        );
        assert!(
            password_problem("QWERTYUIOP123", "a@b.c")
                .unwrap()
                .contains("common")
        );
        assert!(
            password_problem("operator.anna-2026", "anna@plant.example")
                .unwrap()
                .contains("email")
        );
        assert!(
            password_problem(&"x".repeat(1025), "a@b.c")
                .unwrap()
                .contains("1024")
        );
        assert_eq!(
            password_problem("pump station 7 blue", "anna@plant.example"),
            None
        );
    }
}
