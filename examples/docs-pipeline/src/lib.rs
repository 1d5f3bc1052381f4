//! The docs-pipeline example: generated queue code (`queues`, committed, never
//! edited by hand), and what the team writes: the handlers (`handlers`) and
//! the export request that enqueues its job through the outbox (`requests`).
//! `stubs` holds the handler skeletons `queuegen generate --stubs` writes for
//! this spec, compiled in the crate's tests so a change to the generator that
//! breaks them fails the build here; `queuegen-tests`' `stubs_current` checks
//! that they are what the generator writes today.

pub mod handlers;
pub mod queues;
pub mod requests;

#[cfg(test)]
mod stubs;

#[cfg(test)]
mod stubs_wiring {
    use crate::{queues, stubs};
    use queuegen_runtime::postgres::Postgres;
    use queuegen_runtime::Redis;

    /// Each stub's handler handed to its queue's worker constructor, so the
    /// types really fit (built, never run: it needs live servers).
    async fn wire(redis: &Redis, pg: &Postgres) -> queuegen_runtime::Result<()> {
        let _ = queues::export::worker(
            redis,
            stubs::export_handler::ExportHandler {
                results: queues::export::results(pg).await?,
            },
        );
        let _ =
            queues::notification::worker(redis, stubs::notification_handler::NotificationHandler);
        let _ = queues::ocr::worker(redis, stubs::ocr_handler::OcrHandler);
        let _ = queues::index::worker(redis, stubs::index_handler::IndexHandler);
        let _ = queues::thumbnail::worker(redis, stubs::thumbnail_handler::ThumbnailHandler);
        let _ = queues::document_ready::worker(
            redis,
            stubs::document_ready_handler::DocumentReadyHandler,
        );
        let _ = queues::reconciliation::worker(
            redis,
            stubs::reconciliation_handler::ReconciliationHandler {
                results: queues::reconciliation::results(pg).await?,
            },
        );
        Ok(())
    }

    #[test]
    fn every_stub_fits_its_queue_s_worker() {
        // Compiling `wire` is the check; naming it keeps it from being dead code.
        let _ = wire;
    }
}
