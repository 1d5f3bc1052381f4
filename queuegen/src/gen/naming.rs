//! Turning spec names into Rust identifiers that read like hand-written code.

/// `ocr-requests` / `ocr_requests` -> `ocr_requests`; keywords get a raw prefix.
pub fn module_name(name: &str) -> String {
    let snake: String = name
        .chars()
        .map(|c| {
            if c == '-' {
                '_'
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect();
    escape_keyword(snake)
}

/// `high_priority` / `high-priority` -> `HighPriority`.
pub fn upper_camel(name: &str) -> String {
    name.split(['_', '-'])
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            match chars.next() {
                Some(first) => first.to_ascii_uppercase().to_string() + chars.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

/// `HighPriority` -> `high_priority`: the wire name `#[derive(FieldEnum)]` gives a variant.
pub fn snake_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
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
        assert_eq!(snake_case("HighPriority"), "high_priority");
        assert_eq!(snake_case(&upper_camel("parquet_v2")), "parquet_v2");
    }
}
