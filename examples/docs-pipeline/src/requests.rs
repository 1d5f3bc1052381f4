//! What the application does when a user asks for an export: records the request and enqueues the export job in one PostgreSQL transaction, through the `export` queue's outbox.

use queuegen_runtime::postgres::{Enqueued, Postgres};
use queuegen_runtime::{NewJob, Timestamp};

use crate::queues::envelopes::ExportRequestedFormat;
use crate::queues::export;

/// Records the request for `export_ref` and enqueues its export job, both
/// or neither: the job is published after the commit, never without the
/// request row. The job id is the request's own id, so a retried request
/// is the same intent.
pub async fn request_export(
    pg: &Postgres,
    tenant: &str,
    export_ref: &str,
    format: ExportRequestedFormat,
) -> anyhow::Result<Enqueued> {
    let mut client = pg.pool().get().await?;
    let tx = client.transaction().await?;
    tx.execute(
        "INSERT INTO export_requests (export_ref, tenant, format) VALUES ($1, $2, $3)",
        &[&export_ref, &tenant, &format!("{format:?}")],
    )
    .await?;
    let job = NewJob::new(
        format!("export-{export_ref}"),
        tenant,
        export::ExportRequested {
            export_ref: export_ref.to_owned(),
            format,
            requested_at: Timestamp::now(),
            row_limit: None,
        },
    );
    let enqueued = export::outbox(pg).enqueue(&tx, job).await?;
    tx.commit().await?;
    Ok(enqueued)
}
