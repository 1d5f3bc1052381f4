//! The read-only pages and their JSON: the overview, a queue, a partition's
//! drill-down, and the status and history the charts and scripts read.

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Json, Response};
use minijinja::context;
use queuegen_runtime::ops::dead_letters::{dead_letters, replayed_as, DeadLetterQuery};
use queuegen_runtime::ops::held::{held_jobs, HeldFor};
use queuegen_runtime::ops::pending::{pending, PendingQuery};
use queuegen_runtime::ops::status::status_of;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

use super::ids;
use super::view::{alert_rows, LibraryRow, PartitionRow, QueueRow};
use super::Dashboard;

/// Rows shown per list on a partition's page.
const SHOWN: usize = 50;

/// `GET /`: every queue, the libraries, the alerts firing now, and the charts.
pub(super) async fn overview(State(dashboard): State<Dashboard>, headers: HeaderMap) -> Response {
    match overview_context(&dashboard).await {
        Ok(page) => dashboard.render_page(&headers, "overview.html", page),
        Err(err) => dashboard.error_page(&headers, &err),
    }
}

/// `GET /fragment/overview`: the overview's tables alone, which the page
/// fetches again every few seconds.
pub(super) async fn overview_fragment(
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
) -> Response {
    match overview_context(&dashboard).await {
        Ok(page) => dashboard.render_page(&headers, "overview_body.html", page),
        Err(err) => dashboard.error_page(&headers, &err),
    }
}

async fn overview_context(dashboard: &Dashboard) -> crate::Result<minijinja::Value> {
    let report = dashboard.status().await?;
    let pipelines =
        crate::pipeline_status(&dashboard.inner.redis, &dashboard.inner.pipelines).await?;
    let queues: Vec<QueueRow> = report.queues.iter().map(QueueRow::of).collect();
    let libraries: Vec<LibraryRow> = report.libraries.iter().map(LibraryRow::of).collect();
    Ok(context! {
        server => dashboard.inner.redis.addr(),
        server_time_ms => report.server_time_ms,
        libraries => libraries,
        queues => queues,
        alerts => alert_rows(&report.queues),
        pipelines => pipelines,
        sample_every_s => dashboard.inner.options.sample_every.as_secs_f64(),
    })
}

/// `GET /queues/{queue}`: a row per partition (and lane), with the actions.
pub(super) async fn queue(
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Response {
    let page = async {
        let queue = dashboard.queue(&name)?;
        let report =
            status_of(&dashboard.inner.redis, std::slice::from_ref(&queue.watched)).await?;
        let status = &report.queues[0];
        let rows: Vec<PartitionRow> = status
            .partitions
            .iter()
            .map(|partition| PartitionRow::of(status, partition))
            .collect();
        Ok::<_, crate::Error>(context! {
            queue => QueueRow::of(status),
            partitions => rows,
            partition_count => queue.config().partitions,
            server_time_ms => report.server_time_ms,
        })
    };
    match page.await {
        Ok(page) => dashboard.render_page(&headers, "queue.html", page),
        Err(err) => dashboard.error_page(&headers, &err),
    }
}

/// A dead letter as a page shows it: the spec's fields only.
#[derive(Debug, Serialize)]
struct DeadLetterRow {
    id: String,
    place: String,
    lane: Option<Cow<'static, str>>,
    job_id: String,
    reason: String,
    detail: String,
    attempt: String,
    deliveries: String,
    /// The dead-letter entry's own fields other than the envelope.
    header: Vec<(String, String)>,
    /// The envelope's fields the spec declares, in the stored order.
    envelope: Vec<(String, String)>,
    /// How many stored fields were withheld (not in the spec).
    withheld: usize,
    /// The ready entry a replay appended, while its marker lasts.
    replayed_as: Option<String>,
}

/// `GET /queues/{queue}/partitions/{partition}`: the partition's pending
/// entries, dead letters and scheduled jobs, each lane included.
pub(super) async fn partition(
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
    Path((name, partition)): Path<(String, String)>,
) -> Response {
    let page = async {
        let queue = dashboard.queue(&name)?;
        let config = queue.config();
        // Parsed here, not by the extractor, so a malformed one gets the
        // dashboard's error page naming it and the queue's partitions.
        let partition = ids::partition_path(config, &partition)?;
        let mut conn = dashboard.inner.redis.shared();
        let pending = pending(
            &mut conn,
            config,
            &PendingQuery {
                partition: Some(partition.index()),
                limit: SHOWN,
                ..PendingQuery::default()
            },
        )
        .await?;
        let letters = dead_letters(
            &mut conn,
            config,
            &DeadLetterQuery {
                partition: Some(partition.index()),
                limit: SHOWN,
                ..DeadLetterQuery::default()
            },
        )
        .await?;
        let replayed = replayed_as(&mut conn, config, &letters).await?;
        let shown = |fields: &mut dyn Iterator<Item = (&String, &String)>| {
            let mut withheld = 0;
            let kept: Vec<(String, String)> = fields
                .filter(|(name, _)| {
                    let keep = queue.shown_fields.contains(name.as_str());
                    withheld += usize::from(!keep);
                    keep
                })
                .map(|(name, value)| (name.clone(), value.clone()))
                .collect();
            (kept, withheld)
        };
        let dead: Vec<DeadLetterRow> = letters
            .iter()
            .zip(replayed)
            .map(|(letter, replayed_as)| {
                let (envelope, withheld) =
                    shown(&mut letter.envelope.iter().map(|(name, value)| (name, value)));
                DeadLetterRow {
                    id: letter.id.clone(),
                    place: letter.place(),
                    lane: letter.lane.clone(),
                    job_id: letter.field("job_id").to_owned(),
                    reason: letter.field("reason").to_owned(),
                    detail: letter.field("detail").to_owned(),
                    attempt: letter.field("attempt").to_owned(),
                    deliveries: letter.field("deliveries").to_owned(),
                    header: letter
                        .fields
                        .iter()
                        .filter(|(name, _)| name.as_str() != "envelope")
                        .map(|(name, value)| (name.clone(), value.clone()))
                        .collect(),
                    envelope,
                    withheld,
                    replayed_as,
                }
            })
            .collect();
        let mut retries = Vec::new();
        let mut delayed = Vec::new();
        let mut retries_total = 0;
        let mut delayed_total = 0;
        for stream in config.streams_of(&[partition]) {
            let lane = config.lane_of_stream(stream).map(|lane| lane.name.clone());
            let set = held_jobs(&mut conn, config, stream, HeldFor::Retry, SHOWN).await?;
            retries_total += set.total;
            retries.extend(set.jobs.into_iter().map(|job| (lane.clone(), job)));
            let set = held_jobs(&mut conn, config, stream, HeldFor::Delay, SHOWN).await?;
            delayed_total += set.total;
            delayed.extend(set.jobs.into_iter().map(|job| (lane.clone(), job)));
        }
        retries.sort_by_key(|(_, job)| job.due_ms);
        delayed.sort_by_key(|(_, job)| job.due_ms);
        retries.truncate(SHOWN);
        delayed.truncate(SHOWN);
        let lanes: Vec<&str> = config.lanes.iter().map(|lane| &*lane.name).collect();
        Ok::<_, crate::Error>(context! {
            queue => name,
            partition => partition,
            lanes => lanes,
            pending => pending,
            dead_letters => dead,
            retries => retries,
            retries_total => retries_total,
            delayed => delayed,
            delayed_total => delayed_total,
            shown => SHOWN,
        })
    };
    match page.await {
        Ok(page) => dashboard.render_page(&headers, "partition.html", page),
        Err(err) => dashboard.error_page(&headers, &err),
    }
}

/// Any path the dashboard has no page for: its error page (with the
/// security headers), naming the path as the browser asked for it (a
/// nesting app strips the mount point from `uri`).
pub(super) async fn not_found(
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let err = crate::Error::NotFound(format!(
        "the dashboard has no page {}{}",
        dashboard.inner.options.mounted_at,
        uri.path()
    ));
    dashboard.error_page(&headers, &err)
}

/// `GET /api/status`: the `status` model and each pipeline's joins, as
/// `queuegen status --json` prints them.
pub(super) async fn status_json(State(dashboard): State<Dashboard>) -> Response {
    match dashboard.status_document().await {
        Ok(report) => Json(report).into_response(),
        Err(err) => err.json(),
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct SeriesQuery {
    queue: Option<String>,
}

/// `GET /api/series[?queue=Q]`: the sampled history as chart columns, of
/// one queue or all summed.
pub(super) async fn series_json(
    State(dashboard): State<Dashboard>,
    Query(query): Query<SeriesQuery>,
) -> Response {
    let queue = query.queue.filter(|queue| !queue.is_empty());
    if let Some(name) = &queue {
        if let Err(err) = dashboard.queue(name) {
            return err.json();
        }
    }
    Json(dashboard.inner.history.series(queue.as_deref())).into_response()
}
