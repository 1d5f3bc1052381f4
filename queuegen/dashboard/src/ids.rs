//! The numbers and names the dashboard takes from a request to name a
//! partition, a stream entry or a pipeline run, checked before anything is
//! sent to Redis: a malformed one is the operator's mistake (400, naming it
//! and the expected form), never a Redis error passed on as a 502.

use queuegen_runtime::stream_id::StreamId;
use queuegen_runtime::{Partition, QueueConfig};

use crate::Error;

/// A dead letter's stream ID as given (`1733486400000-0`): both parts, as
/// every ID the pages show has them. A bare `<ms>` is refused: Redis would
/// read it as a range of every entry of that millisecond.
pub(super) fn dead_letter_id(text: &str) -> Result<&str, Error> {
    // The runtime's rule, which `queuegen dlq` applies too.
    if StreamId::parse_whole(text).is_ok() {
        return Ok(text);
    }
    Err(Error::BadRequest(format!(
        "dead letter ID {text:?} is not a stream ID: a stream ID is <unix ms>-<sequence>, \
         two whole numbers such as 1733486400000-0 (copy it from the partition's page)"
    )))
}

/// A partition number from a form or query (`partition=3`); whether the
/// queue has it is checked with the queue.
pub(super) fn partition_field(text: &str) -> Result<u16, Error> {
    text.parse().map_err(|_| {
        Error::BadRequest(format!(
            "partition must be a partition number, got {text:?}"
        ))
    })
}

/// The `{partition}` of a page's path, which must be one `config` has.
pub(super) fn partition_path(config: &QueueConfig, text: &str) -> Result<Partition, Error> {
    match text.parse::<u16>() {
        Ok(partition) => Ok(config.check_partition(partition)?),
        Err(_) => Err(Error::BadRequest(format!(
            "partition {text:?} is not a partition number: queue {} has partitions 0..{}",
            config.queue,
            config.partitions.saturating_sub(1)
        ))),
    }
}

/// A run ID from a page's path or the lookup form, in `pipeline`: the
/// `job_id` of the first stage's job that started the run. Any text a
/// producer could have given, except an empty one, one with spaces at
/// either end (a copy-and-paste slip; no producer's job_id has them in
/// practice) or one with control characters (a newline or tab pasted along).
pub(super) fn run_id<'a>(pipeline: &str, text: &'a str) -> Result<&'a str, Error> {
    let problem = if text.is_empty() {
        "is empty"
    } else if text.trim() != text {
        "has spaces at its start or end"
    } else if text.chars().any(char::is_control) {
        "holds a control character"
    } else {
        return Ok(text);
    };
    Err(Error::BadRequest(format!(
        "run ID {text:?} of pipeline {pipeline} {problem}: a run ID is the job_id of the \
         first stage's job that started the run, such as doc-42 (copy it from the \
         pipeline's page or `queuegen runs`)"
    )))
}

/// `text` as one segment of a URL path: every byte but the unreserved
/// `A-Z a-z 0-9 - . _ ~` percent-encoded, so a run ID holding `/`, `?`,
/// `#` or `%` links to its own page.
pub(super) fn path_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_id_is_any_text_but_an_empty_padded_or_control_one() {
        for good in ["doc-42", "doc/1", "a b", "ünï", "{x}", "x%2F"] {
            assert_eq!(run_id("documents", good).unwrap(), good);
        }
        for (bad, problem) in [
            ("", "is empty"),
            (" doc", "has spaces at its start or end"),
            ("doc\n", "has spaces at its start or end"),
            ("do\tc", "holds a control character"),
            ("do\u{7f}c", "holds a control character"),
        ] {
            let err = run_id("documents", bad).unwrap_err();
            assert!(
                err.to_string()
                    .starts_with(&format!("run ID {bad:?} of pipeline documents {problem}")),
                "{err}"
            );
            assert_eq!(err.status(), axum::http::StatusCode::BAD_REQUEST);
        }
    }

    #[test]
    fn a_path_segment_keeps_only_unreserved_bytes() {
        assert_eq!(path_segment("doc-42_a.b~"), "doc-42_a.b~");
        assert_eq!(path_segment("doc/1 ?#%"), "doc%2F1%20%3F%23%25");
        assert_eq!(path_segment("é"), "%C3%A9");
    }

    #[test]
    fn only_whole_stream_ids_name_a_dead_letter() {
        assert_eq!(
            dead_letter_id("1733486400000-0").unwrap(),
            "1733486400000-0"
        );
        assert_eq!(dead_letter_id("0-1").unwrap(), "0-1");
        for bad in [
            "",
            "abc",
            "1733486400000",
            "1733486400000-",
            "-0",
            "1-2-3",
            "1-x",
            " 1-0",
            "+",
            "18446744073709551616-0",
        ] {
            let err = dead_letter_id(bad).unwrap_err();
            assert!(
                err.to_string()
                    .starts_with(&format!("dead letter ID {bad:?} is not a stream ID")),
                "{err}"
            );
            assert_eq!(err.status(), axum::http::StatusCode::BAD_REQUEST);
        }
    }
}
