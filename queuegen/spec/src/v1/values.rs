//! Typed scalar reads (durations, sizes, counts, choices, strings, lists),
//! each reporting a malformed value at the value with a fix.

use std::time::Duration;

use crate::suggest;
use crate::units::{self, DURATION_HELP, SIZE_HELP};
use crate::yaml::Node;

use super::read::{Ctx, Item};

/// A positive duration such as `30s`.
pub(crate) fn duration(ctx: &mut Ctx<'_>, item: &Item<'_>) -> Option<Duration> {
    match item.node {
        Node::Str(text) => match units::parse_duration(text) {
            Ok(d) if d.is_zero() => {
                ctx.refuse(&item.value(), "must be longer than zero", DURATION_HELP)
            }
            Ok(d) => Some(d),
            Err(reason) => ctx.refuse(
                &item.value(),
                format!("`{text}` is not a duration: {reason}"),
                DURATION_HELP,
            ),
        },
        Node::Int(n) => ctx.refuse(
            &item.value(),
            format!("`{n}` is not a duration: it has no unit"),
            format!("write `{n}s` for seconds; units are ms, s, m, h and d"),
        ),
        other => ctx.refuse(
            &item.value(),
            format!("expected a duration such as 30s, found {}", other.kind()),
            DURATION_HELP,
        ),
    }
}

/// A positive size in bytes: an integer, or a string such as `2KiB`.
pub(crate) fn size(ctx: &mut Ctx<'_>, item: &Item<'_>) -> Option<u64> {
    let bytes = match item.node {
        Node::Int(n) => match u64::try_from(*n) {
            Ok(n) => n,
            Err(_) => return ctx.refuse(&item.value(), format!("`{n}` is not a size"), SIZE_HELP),
        },
        Node::Str(text) => match units::parse_size(text) {
            Ok(n) => n,
            Err(reason) => {
                return ctx.refuse(
                    &item.value(),
                    format!("`{text}` is not a size: {reason}"),
                    SIZE_HELP,
                )
            }
        },
        other => {
            return ctx.refuse(
                &item.value(),
                format!("expected a size such as 2KiB, found {}", other.kind()),
                SIZE_HELP,
            )
        }
    };
    if bytes == 0 {
        return ctx.refuse(&item.value(), "must be at least 1 byte", SIZE_HELP);
    }
    Some(bytes)
}

/// A whole number in `min..=max`; `why` explains the bounds in the help.
pub(crate) fn count(
    ctx: &mut Ctx<'_>,
    item: &Item<'_>,
    min: u64,
    max: u64,
    why: &str,
) -> Option<u64> {
    let n = match item.node {
        Node::Int(n) => *n,
        Node::Str(text) if text.trim().parse::<i128>().is_ok() => {
            return ctx.refuse(
                &item.value(),
                format!("expected a whole number, found the string \"{text}\""),
                format!("write {} without quotes", text.trim()),
            )
        }
        other => {
            return ctx.refuse(
                &item.value(),
                format!("expected a whole number, found {}", other.kind()),
                format!("write a whole number from {min} to {max}"),
            )
        }
    };
    let problem = if n < i128::from(min) {
        format!("must be at least {min}, found {n}")
    } else if n > i128::from(max) {
        format!("must be at most {max}, found {n}")
    } else {
        return u64::try_from(n).ok();
    };
    ctx.refuse(&item.value(), problem, why)
}

/// A number (integer or decimal) of at least 1.
pub(crate) fn factor(ctx: &mut Ctx<'_>, item: &Item<'_>) -> Option<f64> {
    let value = match item.node {
        Node::Int(n) => *n as f64,
        Node::Float(f) => *f,
        other => {
            return ctx.refuse(
                &item.value(),
                format!("expected a number such as 2 or 1.5, found {}", other.kind()),
                "write the growth per attempt as a number of at least 1",
            )
        }
    };
    if !value.is_finite() || value < 1.0 {
        return ctx.refuse(
            &item.value(),
            format!("must be at least 1, found {value}"),
            "a factor below 1 would shrink the delay with every attempt; use 1 for a constant delay",
        );
    }
    Some(value)
}

pub(crate) fn boolean(ctx: &mut Ctx<'_>, item: &Item<'_>) -> Option<bool> {
    match item.node {
        Node::Bool(b) => Some(*b),
        Node::Str(text) if text == "true" || text == "false" => ctx.refuse(
            &item.value(),
            format!("expected true or false, found the string \"{text}\""),
            format!("write {text} without quotes"),
        ),
        other => ctx.refuse(
            &item.value(),
            format!("expected true or false, found {}", other.kind()),
            "write true or false",
        ),
    }
}

/// Any string. Numbers and booleans are refused rather than converted, so
/// that `min_version: 7.10` is not silently read as "7.1".
pub(crate) fn string<'a>(ctx: &mut Ctx<'_>, item: &Item<'a>) -> Option<&'a str> {
    match item.node {
        Node::Str(text) => Some(text),
        other @ (Node::Int(_) | Node::Float(_) | Node::Bool(_)) => ctx.refuse(
            &item.value(),
            format!("expected a string, found {}", other.kind()),
            format!("quote it: \"{}\"", other.key_text()),
        ),
        other => ctx.refuse(
            &item.value(),
            format!("expected a string, found {}", other.kind()),
            "write a string",
        ),
    }
}

/// One of `options`, with did-you-mean.
pub(crate) fn choice(
    ctx: &mut Ctx<'_>,
    item: &Item<'_>,
    options: &'static [&'static str],
    what: &str,
) -> Option<&'static str> {
    let text = match item.node {
        Node::Str(text) => text.clone(),
        Node::Null | Node::Seq(_) | Node::Map(_) => {
            return ctx.refuse(
                &item.value(),
                format!("expected a {what}, found {}", item.node.kind()),
                suggest::help("", options.iter().copied(), "one of"),
            )
        }
        other => other.key_text(),
    };
    if let Some(found) = options.iter().find(|o| **o == text) {
        return Some(found);
    }
    let mut help = suggest::help(&text, options.iter().copied(), "one of");
    if help.starts_with("did you") {
        let all: Vec<_> = options.iter().map(|o| format!("`{o}`")).collect();
        help = format!("{help} (one of {})", all.join(", "));
    }
    ctx.refuse(&item.value(), format!("unknown {what} `{text}`"), help)
}

/// The items of a list.
pub(crate) fn list<'a>(ctx: &mut Ctx<'_>, item: &Item<'a>, example: &str) -> Option<Vec<Item<'a>>> {
    match item.node {
        Node::Seq(items) => Some(
            items
                .iter()
                .enumerate()
                .map(|(i, node)| item.index(i, node))
                .collect(),
        ),
        other => ctx.refuse(
            &item.value(),
            format!("expected a list, found {}", other.kind()),
            format!("write a list: {example}"),
        ),
    }
}
