//! Name rules: what breaks the hash-tag key layout, naming conventions, header
//! collisions and credential-looking field names.

use crate::limits::HEADER_FIELDS;

use super::read::{At, Ctx};

/// The reason a name would break `prefix:{queue-NN}:ready`, if it would.
pub(crate) fn key_layout_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("must not be empty".to_owned());
    }
    let bad = name
        .chars()
        .find(|c| matches!(c, '{' | '}' | ':') || c.is_whitespace())?;
    let shown = if bad.is_whitespace() {
        "whitespace".to_owned()
    } else {
        format!("`{bad}`")
    };
    Some(format!(
        "contains {shown}, which breaks the hash-tag key layout `prefix:{{queue-NN}}:ready`"
    ))
}

const KEY_LAYOUT_HELP: &str =
    "queue, group, service and key prefix names must not contain `{`, `}`, `:` or whitespace";

fn key_layout_help(name: &str) -> &'static str {
    if name.is_empty() {
        "give it a name, or leave the key out for the default"
    } else {
        KEY_LAYOUT_HELP
    }
}

/// Service and queue names: `^[a-z][a-z0-9_-]*$`.
pub(crate) fn is_lower_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// The longest lane name.
pub(crate) const LANE_NAME_MAX: usize = 32;

/// Lane names: `^[a-z][a-z0-9-]{0,31}$`.
pub(crate) fn is_lane_name(name: &str) -> bool {
    name.len() <= LANE_NAME_MAX && has_lane_name_chars(name)
}

/// `^[a-z][a-z0-9-]*$`: a lane name but for its length.
fn has_lane_name_chars(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// Field names and enum values: `^[a-z][a-z0-9]*(_[a-z0-9]+)*$`.
pub(crate) fn is_snake_case(name: &str) -> bool {
    name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name.split('_').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        })
}

/// Envelope names: `^[A-Z][A-Za-z0-9]*$`.
pub(crate) fn is_upper_camel(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_uppercase()) && chars.all(|c| c.is_ascii_alphanumeric())
}

/// Words of a name, split at `_`, `-`, spaces, and lower-to-upper changes.
fn words(name: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if !c.is_ascii_alphanumeric() {
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            prev_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && prev_lower && !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        current.push(c.to_ascii_lowercase());
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// `subjectRef` -> `subject_ref`, for help texts.
pub(crate) fn to_snake_case(name: &str) -> String {
    words(name).join("_")
}

/// `ocr_requested` -> `OcrRequested`, for help texts.
pub(crate) fn to_upper_camel(name: &str) -> String {
    words(name)
        .iter()
        .map(|w| {
            let mut chars = w.chars();
            chars
                .next()
                .map(|f| f.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// Substrings that mark a field as carrying a credential.
const CREDENTIAL_WORDS: &str = "password passwd passphrase secret token api_key apikey credential \
    private_key privkey access_key session_key signing_key";

/// Suffixes that say the field holds a reference to a credential, not the
/// credential itself (`secret_ref`, `token_id`): those are what we recommend.
const REFERENCE_SUFFIXES: &[&str] = &["_ref", "_id", "_name"];

/// The credential word a string field's name contains, if any.
pub(crate) fn credential_word(name: &str) -> Option<&'static str> {
    let lower = name.to_ascii_lowercase();
    if REFERENCE_SUFFIXES.iter().any(|s| lower.ends_with(s)) {
        return None;
    }
    CREDENTIAL_WORDS
        .split_whitespace()
        .find(|w| lower.contains(w))
}

pub(crate) fn is_header_field(name: &str) -> bool {
    HEADER_FIELDS.iter().any(|h| h.name == name)
}

/// Checks a service or queue name; `what` is "service" or "queue".
pub(crate) fn check_lower_name(ctx: &mut Ctx<'_>, at: &At, name: &str, what: &str) -> bool {
    if let Some(problem) = key_layout_problem(name) {
        return ctx.fail(at, format!("{what} name {problem}"), key_layout_help(name));
    }
    if !is_lower_name(name) {
        let fixed = words(name).join("-");
        let hint = if is_lower_name(&fixed) {
            format!(", e.g. `{fixed}`")
        } else {
            String::new()
        };
        return ctx.fail(
            at,
            format!("{what} name `{name}` is not lowercase letters, digits, `_` and `-`"),
            format!("start with a lowercase letter and use only a-z, 0-9, `_` and `-`{hint}"),
        );
    }
    true
}

/// Checks a lane name: it is part of the lane's keys
/// (`prefix:lane-NAME:{queue-NN}:ready`).
pub(crate) fn check_lane_name(ctx: &mut Ctx<'_>, at: &At, name: &str) -> bool {
    const RULE: &str = "lowercase letters, digits and `-`, starting with a letter, at most 32 characters: the name is part of the lane's keys (`PREFIX:lane-NAME:{QUEUE-NN}:ready`)";
    if name.is_empty() {
        return ctx.fail(
            at,
            "lane name is empty",
            format!("name the lane, e.g. `high`: {RULE}"),
        );
    }
    if is_lane_name(name) {
        return true;
    }
    let fixed = words(name).join("-");
    let hint = if is_lane_name(&fixed) && fixed != name {
        format!(", e.g. `{fixed}`")
    } else {
        String::new()
    };
    let message = if has_lane_name_chars(name) {
        format!(
            "lane name `{name}` is {} characters long, more than {LANE_NAME_MAX}",
            name.len()
        )
    } else {
        format!(
            "lane name `{name}` is not lowercase letters, digits and `-` starting with a letter"
        )
    };
    ctx.fail(at, message, format!("use {RULE}{hint}"))
}

/// Checks a group name or key prefix: only the key-layout rule applies.
pub(crate) fn check_key_safe(ctx: &mut Ctx<'_>, at: &At, name: &str, what: &str) -> bool {
    match key_layout_problem(name) {
        Some(problem) => ctx.fail(at, format!("{what} {problem}"), key_layout_help(name)),
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_layout_breakers() {
        assert_eq!(key_layout_problem("ocr"), None);
        assert_eq!(key_layout_problem("ocr-workers-v2"), None);
        assert!(key_layout_problem("").is_some());
        for bad in ["a{b", "a}b", "a:b", "a b", "a\tb"] {
            assert!(key_layout_problem(bad).is_some(), "{bad}");
        }
        assert!(key_layout_problem("a b").unwrap().contains("whitespace"));
    }

    #[test]
    fn naming_conventions() {
        assert!(is_lower_name("docs-pipeline"));
        assert!(is_lower_name("ocr_v2"));
        assert!(!is_lower_name("Ocr"));
        assert!(!is_lower_name("2ocr"));
        assert!(is_snake_case("subject_ref"));
        assert!(is_snake_case("v2"));
        assert!(!is_snake_case("subjectRef"));
        assert!(!is_snake_case("subject__ref"));
        assert!(!is_snake_case("subject_"));
        assert!(!is_snake_case("_subject"));
        assert!(is_upper_camel("OcrRequested"));
        assert!(!is_upper_camel("ocrRequested"));
        assert!(!is_upper_camel("Ocr_Requested"));
        assert!(is_lane_name("high"));
        assert!(is_lane_name("p2-bulk"));
        assert!(is_lane_name(&"a".repeat(32)));
        assert!(!is_lane_name(&"a".repeat(33)));
        for bad in [
            "", "High", "2high", "-high", "high_low", "high low", "hígh", "a:b",
        ] {
            assert!(!is_lane_name(bad), "{bad}");
        }
    }

    #[test]
    fn case_conversion_for_help() {
        assert_eq!(to_snake_case("subjectRef"), "subject_ref");
        assert_eq!(to_snake_case("Subject-Ref"), "subject_ref");
        assert_eq!(to_upper_camel("ocr_requested"), "OcrRequested");
        assert_eq!(to_upper_camel("ocrRequested"), "OcrRequested");
    }

    #[test]
    fn credential_names() {
        assert_eq!(credential_word("db_password"), Some("password"));
        assert_eq!(credential_word("API_KEY"), Some("api_key"));
        assert_eq!(credential_word("apikey"), Some("apikey"));
        assert_eq!(credential_word("client_secret"), Some("secret"));
        assert_eq!(credential_word("refresh_token"), Some("token"));
        assert_eq!(credential_word("secret_ref"), None);
        assert_eq!(credential_word("token_id"), None);
        assert_eq!(credential_word("subject_ref"), None);
        assert_eq!(credential_word("priority"), None);
    }
}
