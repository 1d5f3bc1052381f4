//! The numbers the dashboard takes from a request to name a partition or a
//! stream entry, checked before anything is sent to Redis: a malformed one
//! is the operator's mistake (400, naming it and the expected form), never a
//! Redis error passed on as a 502.

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

#[cfg(test)]
mod tests {
    use super::*;

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
