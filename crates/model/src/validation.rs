//! Field-level validation: every check names the field it refuses, so the API can answer with a
//! `validation_error` whose details point at the exact input.

use serde::Serialize;

/// One refused field: `field` is a path such as `config.port` or `data[3].value`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Collects field errors so a request is refused once with all its problems.
#[derive(Debug, Default)]
pub struct Validator {
    errors: Vec<FieldError>,
}

impl Validator {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn add(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.errors.push(FieldError::new(field, message));
    }
    pub fn check(&mut self, ok: bool, field: &str, message: impl Into<String>) {
        if !ok {
            self.add(field, message);
        }
    }
    /// A trimmed, non-empty text of at most `max` characters without control characters.
    pub fn text(&mut self, field: &str, value: &str, max: usize) {
        if value.trim().is_empty() {
            self.add(field, "must not be empty");
        } else if value.chars().count() > max {
            self.add(field, format!("must be at most {max} characters"));
        } else if value.chars().any(char::is_control) {
            self.add(field, "must not contain control characters");
        }
    }
    pub fn email(&mut self, field: &str, value: &str) {
        let ok = value.len() <= 254
            && value.split_once('@').is_some_and(|(local, domain)| {
                !local.is_empty()
                    && !domain.is_empty()
                    && !domain.starts_with('.')
                    && !domain.ends_with('.')
                    && !value.chars().any(|c| c.is_whitespace() || c.is_control())
                    && domain
                        .chars()
                        .all(|c| c.is_alphanumeric() || c == '.' || c == '-')
            });
        self.check(
            ok,
            field,
            "must be an email address such as user@example.com",
        );
    }
    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }
    /// Errors so far.
    pub fn len(&self) -> usize {
        self.errors.len()
    }
    /// Adds another validator's errors.
    pub fn extend(&mut self, other: Validator) {
        self.errors.extend(other.errors);
    }
    pub fn finish(self) -> Result<(), Vec<FieldError>> {
        if self.errors.is_empty() {
            Ok(())
        } else {
            Err(self.errors)
        }
    }
}

/// Field errors in one line: `name: must not be empty; email: must be an email address ...`.
pub fn describe(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(|e| format!("{}: {}", e.field, e.message))
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collects_every_problem() {
        let mut v = Validator::new();
        v.text("name", "  ", 10);
        v.text("label", "abcdefghijk", 10);
        v.email("email", "not-an-email");
        v.email("ok", "admin@localhost");
        let errors = v.finish().unwrap_err();
        let fields: Vec<_> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["name", "label", "email"]);
    }
}
