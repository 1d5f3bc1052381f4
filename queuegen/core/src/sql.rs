//! The one rule for SQL names queuegen writes unquoted (the schema of its PostgreSQL tables).

/// Whether `name` is a plain lowercase SQL identifier: letters, digits and
/// `_`, not starting with a digit, at most 63 bytes (PostgreSQL's limit), so
/// that it never needs quoting. The spec checker rejects other schema names
/// and the runtime refuses them at start.
pub fn is_plain_identifier(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b'a'..=b'z' | b'_'))
        && bytes.all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_'))
        && name.len() <= 63
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_identifiers() {
        for good in ["queuegen", "docs_pipeline", "_q1", "q1", &"a".repeat(63)] {
            assert!(is_plain_identifier(good), "{good}");
        }
        for bad in [
            "",
            "1abc",
            "Docs",
            "docs-pipeline",
            "a.b",
            "a b",
            "é",
            "q\u{0}",
            &"a".repeat(64),
        ] {
            assert!(!is_plain_identifier(bad), "{bad:?}");
        }
    }
}
