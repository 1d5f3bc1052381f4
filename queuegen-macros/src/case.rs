//! Converts a variant name to the snake_case wire value of a `FieldEnum`.

/// `HighPriority` -> `high_priority`, `HTTPError` -> `http_error`, `V2Beta` -> `v2_beta`.
///
/// A word starts at an upper-case letter that follows a lower-case letter or a
/// digit, or that ends a run of capitals (the `E` of `HTTPError`).
pub(crate) fn snake_case(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::with_capacity(name.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if c.is_uppercase() && i > 0 {
            let prev = chars[i - 1];
            let next_is_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            if prev.is_lowercase()
                || prev.is_ascii_digit()
                || (prev.is_uppercase() && next_is_lower)
            {
                out.push('_');
            }
        }
        out.extend(c.to_lowercase());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::snake_case;

    #[test]
    fn splits_words() {
        assert_eq!(snake_case("Low"), "low");
        assert_eq!(snake_case("HighPriority"), "high_priority");
        assert_eq!(snake_case("HTTPError"), "http_error");
        assert_eq!(snake_case("V2Beta"), "v2_beta");
        assert_eq!(snake_case("Version2"), "version2");
        assert_eq!(snake_case("A"), "a");
        assert_eq!(snake_case("Already_Snake"), "already_snake");
    }
}
