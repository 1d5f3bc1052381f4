//! Moves a syntax error about a flow sequence, flow mapping or quoted string
//! that is never closed from where the parser gave up (often lines later, at
//! an innocent key) to the bracket or quote that opened it: that is where
//! the mistake is, and where the fix goes.
//!
//! libyaml reports such an error as "PROBLEM, while parsing a flow sequence
//! at line L column C": the problem's mark is where it gave up, the
//! context's mark is the opener. A missing `,` between two items of a
//! sequence that *is* closed reads the same, so the source is scanned from
//! the opener to tell the two apart; only an opener with no matching closer
//! is blamed.

use super::locate::Pos;

/// Where to report a syntax error, what to say and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Explained {
    pub pos: Pos,
    pub message: String,
    pub help: &'static str,
}

/// `message` is libyaml's text without the problem's own position
/// ("did not find expected ',' or ']', while parsing a flow sequence at
/// line 2 column 4"); `gave_up` is the problem's position. `None` when the
/// error is not about an opener, or the source does not bear it out.
pub(super) fn explain(source: &str, message: &str, gave_up: Pos) -> Option<Explained> {
    let (problem, context) = message.split_once(", while ")?;
    let (what, opened) = match context.split_once(" at line ") {
        Some((what, at)) => (what, parse_pos(at)?),
        // libyaml omits a context mark at the very start of the document.
        None => (context, Pos { line: 1, column: 1 }),
    };
    let opener = char_at(source, opened)?;
    let gave_up_text = format!(
        "the parser gave up at line {} column {}: {problem}",
        gave_up.line, gave_up.column
    );
    match (what, opener) {
        ("parsing a flow sequence", '[') | ("parsing a flow mapping", '{')
            if problem.starts_with("did not find expected ','") =>
        {
            let (kind, closer) = if opener == '[' {
                ("sequence", ']')
            } else {
                ("mapping", '}')
            };
            if is_closed(source, opened) {
                // Closed: the parser stopped at an item that does not follow a `,`.
                return Some(Explained {
                    pos: gave_up,
                    message: message.to_owned(),
                    help: if opener == '[' {
                        "separate the items with `,` (an item with a `,`, `[` or `{` in it needs quotes)"
                    } else {
                        "separate the items with `,` and write each as `key: value` (a value with a `,`, `[` or `{` in it needs quotes)"
                    },
                });
            }
            Some(Explained {
                pos: opened,
                message: format!("this flow {kind} `{opener}` is never closed ({gave_up_text})"),
                help: if closer == ']' {
                    "close the sequence with `]` after its last item"
                } else {
                    "close the mapping with `}` after its last entry"
                },
            })
        }
        ("scanning a quoted scalar", '"' | '\'')
            if problem == "found unexpected end of stream"
                || problem == "found unexpected document indicator" =>
        {
            let (kind, help) = if opener == '"' {
                ("double-quoted", "close the string with `\"` where it ends")
            } else {
                (
                    "single-quoted",
                    "close the string with `'` where it ends (write a `'` inside it as `''`)",
                )
            };
            let why = if problem == "found unexpected end of stream" {
                format!("the parser reached the end of the file looking for its closing `{opener}`")
            } else {
                gave_up_text
            };
            Some(Explained {
                pos: opened,
                message: format!("this {kind} string is never closed ({why})"),
                help,
            })
        }
        _ => None,
    }
}

/// `"2 column 4"` (what follows " at line ").
fn parse_pos(text: &str) -> Option<Pos> {
    let (line, rest) = text.split_once(" column ")?;
    let column: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some(Pos {
        line: line.parse().ok()?,
        column: column.parse().ok()?,
    })
}

/// Byte offset of the 1-based line and column (columns count characters,
/// as libyaml's marks do; a byte order mark is not counted).
fn offset(source: &str, pos: Pos) -> Option<usize> {
    let mut start = 0;
    for _ in 1..pos.line {
        start += source[start..].find('\n')? + 1;
    }
    if start == 0 && source.starts_with('\u{feff}') {
        start = '\u{feff}'.len_utf8();
    }
    let line = &source[start..];
    let line = &line[..line.find('\n').unwrap_or(line.len())];
    let (at, _) = line.char_indices().nth(pos.column.checked_sub(1)?)?;
    Some(start + at)
}

fn char_at(source: &str, pos: Pos) -> Option<char> {
    source[offset(source, pos)?..].chars().next()
}

/// Whether the `[` or `{` at `opened` has its matching closer. Brackets
/// inside quoted strings and comments do not count; a closer of the wrong
/// kind (`[a}`) means it is not closed.
fn is_closed(source: &str, opened: Pos) -> bool {
    let Some(start) = offset(source, opened) else {
        return false;
    };
    let mut open: Vec<char> = Vec::new();
    // The last character that was not blank (or the line break): a quote
    // opens a string only where an item, key or value starts (`it's` is a
    // plain word).
    let mut last = '\n';
    let mut prev = '\n';
    let mut chars = source[start..].chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '[' | '{' => open.push(if c == '[' { ']' } else { '}' }),
            ']' | '}' => {
                if open.pop() != Some(c) {
                    return false;
                }
                if open.is_empty() {
                    return true;
                }
            }
            '#' if prev.is_whitespace() => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '"' | '\'' if matches!(last, '[' | '{' | ',' | ':' | '?' | '-' | '\n') => {
                // Skip the quoted string; `\"` escapes in double quotes, `''` in single.
                let mut closed = false;
                while let Some(d) = chars.next() {
                    if c == '"' && d == '\\' {
                        chars.next();
                    } else if d == c {
                        if c == '\'' && chars.peek() == Some(&'\'') {
                            chars.next();
                        } else {
                            closed = true;
                            break;
                        }
                    }
                }
                if !closed {
                    return false;
                }
            }
            _ => {}
        }
        prev = c;
        if c == '\n' || !c.is_whitespace() {
            last = c;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(line: usize, column: usize) -> Pos {
        Pos { line, column }
    }

    const SEQ: &str =
        "did not find expected ',' or ']', while parsing a flow sequence at line 2 column 4";

    #[test]
    fn an_unclosed_sequence_is_blamed_at_its_bracket() {
        let explained = explain("a: 1\nb: [1, 2\nc: 3\n", SEQ, pos(3, 2)).unwrap();
        assert_eq!(explained.pos, pos(2, 4));
        assert_eq!(
            explained.message,
            "this flow sequence `[` is never closed (the parser gave up at line 3 column 2: did not find expected ',' or ']')"
        );
        assert_eq!(
            explained.help,
            "close the sequence with `]` after its last item"
        );
    }

    #[test]
    fn a_closed_sequence_keeps_the_parsers_position() {
        let explained = explain("a: 1\nb: [\"1\" \"2\"]\n", SEQ, pos(2, 9)).unwrap();
        assert_eq!(explained.pos, pos(2, 9));
        assert_eq!(explained.message, SEQ);
        assert!(explained.help.starts_with("separate the items with `,`"));
    }

    #[test]
    fn brackets_in_strings_and_comments_do_not_close() {
        let doc = "a: 1\nb: [x, \"]\", 'it''s ]' # ]\nc: 3\n";
        assert!(!is_closed(doc, pos(2, 4)));
        assert!(is_closed("b: [x, \"]\", [y], {z: 1}]\n", pos(1, 4)));
        assert!(
            is_closed("b: [it's, y]\n", pos(1, 4)),
            "a plain word's quote"
        );
        assert!(
            !is_closed("b: [x}\n", pos(1, 4)),
            "closed by the wrong bracket"
        );
    }

    #[test]
    fn columns_count_characters_and_skip_a_byte_order_mark() {
        assert_eq!(char_at("é: [x\n", pos(1, 4)), Some('['));
        assert_eq!(char_at("\u{feff}[x\n", pos(1, 1)), Some('['));
        assert_eq!(char_at("a\r\nb: [\r\n", pos(2, 4)), Some('['));
        assert_eq!(char_at("a\n", pos(3, 1)), None);
    }

    #[test]
    fn a_position_that_is_not_the_opener_changes_nothing() {
        assert_eq!(explain("a: 1\nb: 1, 2\n", SEQ, pos(3, 1)), None);
    }

    #[test]
    fn other_errors_are_left_alone() {
        let message = "did not find expected key, while parsing a block mapping at line 1 column 1";
        assert_eq!(explain("a: 1\n b: 2\n", message, pos(2, 2)), None);
        let escape =
            "found unknown escape character, while parsing a quoted scalar at line 1 column 4";
        assert_eq!(explain("a: \"\\q\"\n", escape, pos(1, 5)), None);
    }
}
