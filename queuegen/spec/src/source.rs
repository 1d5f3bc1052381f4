//! A spec file's bytes as text: a file that is not UTF-8 is a spec error
//! like any other, positioned at its first invalid byte with a fix, not an
//! unreadable file.

use crate::diagnostic::{Diagnostic, Severity};

/// The bytes as UTF-8 text (a leading byte order mark is kept: the YAML
/// parser skips it), or the error naming the first byte that is not UTF-8.
pub fn decode(bytes: Vec<u8>, file: &str) -> Result<String, Box<Diagnostic>> {
    let err = match String::from_utf8(bytes) {
        Ok(text) => return Ok(text),
        Err(err) => err,
    };
    let bytes = err.as_bytes();
    let valid_up_to = err.utf8_error().valid_up_to();
    let before = std::str::from_utf8(&bytes[..valid_up_to])
        .expect("the bytes before the first invalid one are UTF-8");
    let line_start = before.rfind('\n').map_or(0, |at| at + 1);
    let line_before = &before[line_start..];
    let line = before.matches('\n').count() + 1;
    let column = line_before.chars().count() + 1;
    let byte = bytes[valid_up_to];
    let invalid = bytes[valid_up_to..]
        .utf8_chunks()
        .map(|chunk| chunk.invalid().len())
        .sum::<usize>();

    let what = if valid_up_to == 0 && matches!(bytes, [0xFF, 0xFE, ..] | [0xFE, 0xFF, ..]) {
        format!("the file starts with bytes 0x{:02X} 0x{:02X}, the byte order mark of UTF-16: it was saved as UTF-16", bytes[0], bytes[1])
    } else if err.utf8_error().error_len().is_none() {
        format!("the file ends inside a character: byte 0x{byte:02X} starts a UTF-8 sequence that is cut off")
    } else {
        let latin1 = match byte {
            // Latin-1 (ISO 8859-1) and Windows-1252 agree from 0xA0 up,
            // where most accented letters of a mis-saved file are.
            0xA0..=0xFF => format!(" (in Latin-1 it is `{}`)", char::from(byte)),
            _ => String::new(),
        };
        let after = match line_before.trim_start() {
            "" => "at the start of the line".to_owned(),
            text => {
                let tail: Vec<char> = text.chars().rev().take(24).collect();
                let tail: String = tail.into_iter().rev().collect();
                format!("after `{tail}`")
            }
        };
        format!("byte 0x{byte:02X} {after} is not valid UTF-8{latin1}")
    };
    let more = match invalid.saturating_sub(1) {
        0 => String::new(),
        1 => "; 1 more invalid byte follows".to_owned(),
        n => format!("; {n} more invalid bytes follow"),
    };
    Err(Box::new(Diagnostic {
        severity: Severity::Error,
        file: file.to_owned(),
        line,
        column,
        path: String::new(),
        message: format!("the spec is not UTF-8 text: {what}{more}"),
        help: Some(
            "save the file as UTF-8 (an editor's \"save with encoding\"; from Latin-1: `iconv -f LATIN1 -t UTF-8`)"
                .to_owned(),
        ),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(bytes: &[u8]) -> Diagnostic {
        *decode(bytes.to_vec(), "queues.yaml").unwrap_err()
    }

    #[test]
    fn utf8_is_text() {
        assert_eq!(
            decode("service: café\n".into(), "q.yaml").unwrap(),
            "service: café\n"
        );
    }

    #[test]
    fn latin1_is_named_at_its_line_and_column() {
        let d = error(b"version: 1\nservice: caf\xe9 \xe8\n");
        assert_eq!((d.line, d.column), (2, 13));
        assert_eq!(
            d.message,
            "the spec is not UTF-8 text: byte 0xE9 after `service: caf` is not valid UTF-8 (in Latin-1 it is `é`); 1 more invalid byte follows"
        );
        assert!(d
            .help
            .as_deref()
            .unwrap()
            .starts_with("save the file as UTF-8"));
        assert!(d.is_error() && d.path.is_empty());
    }

    #[test]
    fn columns_count_characters_before_the_byte() {
        let d = error(b"# \xc3\xa9t\xc3\xa9 \x92\n");
        assert_eq!((d.line, d.column), (1, 7));
        assert!(
            d.message.contains("byte 0x92 after `# été `"),
            "{}",
            d.message
        );
    }

    #[test]
    fn utf16_and_a_cut_off_character_say_so() {
        let d = error(b"\xff\xfev\x00");
        assert_eq!((d.line, d.column), (1, 1));
        assert!(d.message.contains("UTF-16"), "{}", d.message);
        let d = error(b"a: \xc3");
        assert_eq!((d.line, d.column), (1, 4));
        assert!(d.message.contains("cut off"), "{}", d.message);
    }
}
