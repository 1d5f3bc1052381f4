//! Handlers of the `docs-pipeline` service's queues, one module per queue.
//! Written once by `queuegen generate --stubs`; this file is yours: queuegen
//! never overwrites it, so declare a later queue's handler module here yourself.

pub mod document_ready_handler;
pub mod export_handler;
pub mod index_handler;
pub mod notification_handler;
pub mod ocr_handler;
pub mod reconciliation_handler;
pub mod thumbnail_handler;
