//! The top-level error displays exactly as the domain error it holds.

use std::time::Duration;

use super::*;

fn redis_error() -> ::redis::RedisError {
    ::redis::RedisError::from((::redis::ErrorKind::Io, "connection closed"))
}

/// A domain error's own display, and the top-level error made from it.
fn displayed_and_wrapped<E: std::fmt::Display + Into<Error>>(err: E) -> (String, Error) {
    (err.to_string(), err.into())
}

#[test]
fn each_domain_displays_the_same_through_the_top_level_error() {
    let samples: Vec<(String, Error)> = vec![
        displayed_and_wrapped(DecodeError::unsupported_schema("OcrRequested", 7, &[1, 2])),
        displayed_and_wrapped(PublishError::EmptyJobId {
            queue: "ocr".to_owned(),
            position: 2,
        }),
        displayed_and_wrapped(SetupError::MissingStream { key: "k".into() }),
        displayed_and_wrapped(OperationError::LeaseHeld {
            key: "lease".into(),
            holder: "h".into(),
        }),
        displayed_and_wrapped(ResultError::NotReplicated {
            key: "r".into(),
            replicas: 2,
            acknowledged: 1,
            timeout: Duration::from_millis(50),
        }),
        displayed_and_wrapped(ConnectionError::ConnectOptions {
            url: "redis://h:1".into(),
            problem: OptionsProblem::TlsFilesWithoutTls,
        }),
        displayed_and_wrapped(PostgresError::Setup {
            target: "u@h:5432/db".into(),
            problem: "p".into(),
        }),
        displayed_and_wrapped(TransitionError::NotOwner(Box::new(NotOwner {
            function: "ack".into(),
            key: "k".into(),
            partition: crate::Partition::new(0),
            job: "j".into(),
            stream_id: "1-0".into(),
            consumer: "c".into(),
            owner: None,
        }))),
        (
            RedisError {
                context: "XADD k".into(),
                source: redis_error(),
            }
            .to_string(),
            Error::redis("XADD k", redis_error()),
        ),
    ];
    for (domain, top) in samples {
        assert_eq!(top.to_string(), domain);
    }
}

#[test]
fn messages_that_were_free_text_read_as_before() {
    let unverified = OperationError::TrimUnverified {
        key: "q:{0}:ready".into(),
        minid: "5-0".into(),
        group: "g".into(),
        what: "pending entry",
        id: "3-0".into(),
    };
    assert_eq!(
        unverified.to_string(),
        "trim of q:{0}:ready to MINID 5-0: verification failed: group \"g\" lost its pending entry 3-0: XRANGE 3-0 3-0 is empty"
    );
    let inventory = OperationError::Inventory {
        key: "k".into(),
        problem: InventoryProblem::Unexpected {
            command: "XRANGE".into(),
            found: "nil".into(),
        },
    };
    assert_eq!(
        inventory.to_string(),
        "inventory of stream k: unexpected XRANGE reply: nil"
    );
    let missing = SetupError::LibraryMissing {
        server: "h:1".into(),
        library: "qg_v1".into(),
        problem: LibraryProblem::NoFunction {
            function: "qg_v1_version".into(),
        },
    };
    assert_eq!(
        missing.to_string(),
        "redis h:1 does not have the Function library qg_v1 (no function qg_v1_version): run `queuegen apply` to load it"
    );
}
