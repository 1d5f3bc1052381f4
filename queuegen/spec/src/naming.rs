//! How spec names become Rust names and back: the one home of the case rules
//! the generator and `#[derive(Envelope)]`/`#[derive(FieldEnum)]` share.
//!
//! The generator names an enum variant with [`upper_camel`] and writes
//! `#[field(rename = "...")]` whenever [`snake_case`] of that variant is not
//! the spec's value; the derive puts [`snake_case`] of a variant on the wire
//! when there is no rename. Both call these functions, so what generated Rust
//! writes is the spec's string by construction ([`variant_rename`]).

/// `ocr-requests` / `ocr_requests` -> `ocr_requests`; keywords get a raw prefix.
pub fn module_name(name: &str) -> String {
    escape_keyword(name.to_ascii_lowercase().replace('-', "_"))
}

/// `high_priority` / `high-priority` -> `HighPriority`.
pub fn upper_camel(name: &str) -> String {
    name.split(['_', '-'])
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            match chars.next() {
                Some(first) => first.to_uppercase().collect::<String>() + chars.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

/// The wire value of an enum variant without a rename: `HighPriority` ->
/// `high_priority`, `HTTPError` -> `http_error`, `V2Beta` -> `v2_beta`.
///
/// A word starts at an upper-case letter that follows a lower-case letter or
/// a digit, or that ends a run of capitals (the `E` of `HTTPError`).
pub fn snake_case(name: &str) -> String {
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

/// The rename the generated variant of spec value `value` needs: `None` when
/// the derive's [`snake_case`] of [`upper_camel`]`(value)` already is `value`
/// (`high_priority`), the value itself when it is not (`a_b` becomes `AB`,
/// whose snake case is `ab`).
pub fn variant_rename(value: &str) -> Option<&str> {
    (snake_case(&upper_camel(value)) != value).then_some(value)
}

/// A field name as a Rust identifier (`type` -> `r#type`).
pub fn field_name(name: &str) -> String {
    escape_keyword(name.to_owned())
}

fn escape_keyword(ident: String) -> String {
    const KEYWORDS: &[&str] = &[
        "as", "async", "await", "break", "const", "continue", "dyn", "else", "enum", "extern",
        "false", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut",
        "pub", "ref", "return", "static", "struct", "trait", "true", "type", "unsafe", "use",
        "where", "while", "abstract", "become", "box", "do", "final", "gen", "macro", "override",
        "priv", "try", "typeof", "unsized", "virtual", "yield",
    ];
    if KEYWORDS.contains(&ident.as_str()) {
        format!("r#{ident}")
    } else {
        ident
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(module_name("ocr-requests"), "ocr_requests");
        assert_eq!(module_name("type"), "r#type");
        assert_eq!(upper_camel("high_priority"), "HighPriority");
        assert_eq!(upper_camel("csv"), "Csv");
        assert_eq!(snake_case(&upper_camel("parquet_v2")), "parquet_v2");
    }

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

    /// The values the generator once left without a rename while the derive
    /// wrote something else on the wire (`a_b` went out as `ab`).
    #[test]
    fn single_letter_words_get_a_rename() {
        for value in ["a_b", "level_a_b", "a_b_c", "a_b_cd", "v2_a_b"] {
            assert_eq!(variant_rename(value), Some(value), "{value}");
        }
        for value in ["low", "high_priority", "parquet_v2", "v2_beta"] {
            assert_eq!(variant_rename(value), None, "{value}");
        }
    }
}
