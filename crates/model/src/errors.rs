//! Reporting errors: one line with the whole cause chain, so that a failure is logged once with
//! everything that explains it.

/// An error with its causes, outermost first: `database error: pool timed out while waiting for
/// an open connection`.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let next = s.to_string();
        // A wrapper that shows its source's text already is not repeated.
        if !text.ends_with(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn the_chain_names_every_cause() {
        let e = Outer(std::io::Error::other("disk on fire"));
        assert_eq!(super::error_chain(&e), "outer: disk on fire");
    }
}
