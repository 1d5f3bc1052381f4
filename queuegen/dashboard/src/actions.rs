//! The operator's actions (replay dead letters, pause and resume
//! partitions): each a confirmation page showing what will happen (the
//! CLI's dry run), then a POST that does it, logged with who and what.
//!
//! Every step is authorized before the request is read further: without the
//! token nothing is shown or done, and a POST of a signed-in browser must
//! carry its session's CSRF token.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::Mutex;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Json, Redirect, Response};
use minijinja::context;
use queuegen_runtime::ops::dead_letters::{dead_letters, replayed_as, DeadLetterQuery};
use queuegen_runtime::ops::pause;
use queuegen_runtime::ops::status::status_of;
use queuegen_runtime::{transitions, Partition};
use serde::{Deserialize, Serialize};

use super::auth::Operator;
use super::ids;
use super::Dashboard;

/// Dead letters one "replay all" takes at most (newest first); the
/// confirmation says when there are more.
const REPLAY_ALL_LIMIT: usize = 1_000;
/// Actions kept in memory for the log page (each is also logged with tracing).
const LOG_KEPT: usize = 500;

/// One action taken through the dashboard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ActionRecord {
    /// Unix ms, this host's clock.
    pub at_ms: u64,
    /// Who: the name given at sign-in, or `bearer token`.
    pub who: String,
    /// `replay`, `pause` or `resume`.
    pub action: &'static str,
    pub queue: String,
    /// What it was applied to: `partition 3 dead letter 1733…-0`, `partitions 0, 1`.
    pub target: String,
    /// What happened: `replayed 1`, `paused 2 (1 already paused)`, or the error.
    pub outcome: String,
}

#[derive(Default)]
pub(super) struct ActionLog {
    records: Mutex<VecDeque<ActionRecord>>,
}

impl ActionLog {
    fn record(&self, record: ActionRecord) {
        tracing::info!(
            target: "queuegen::dashboard::actions",
            who = %record.who,
            action = record.action,
            queue = %record.queue,
            target_ = %record.target,
            outcome = %record.outcome,
            "dashboard action"
        );
        let mut records = self
            .records
            .lock()
            .expect("the action log lock is never poisoned");
        if records.len() == LOG_KEPT {
            records.pop_back();
        }
        records.push_front(record);
    }

    pub(super) fn newest_first(&self) -> Vec<ActionRecord> {
        self.records
            .lock()
            .expect("the action log lock is never poisoned")
            .iter()
            .cloned()
            .collect()
    }
}

/// The fields of an action's query string or form, as text: parsed after
/// the request is authorized, with errors that name the field.
#[derive(Debug, Deserialize)]
struct Fields {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    partition: String,
    #[serde(default)]
    lane: String,
    #[serde(default)]
    id: String,
    #[serde(default)]
    all: String,
    #[serde(default)]
    reason: String,
}

impl Fields {
    /// The fields as text, not yet checked (the CSRF token is read from
    /// them before the request is authorized).
    fn parse(bytes: &[u8]) -> Result<Fields, crate::Error> {
        serde_urlencoded::from_bytes(bytes)
            .map_err(|err| crate::Error::BadRequest(format!("the action's fields: {err}")))
    }

    /// Parsed and checked: a malformed partition or dead-letter ID is a 400
    /// that names it, before anything is read from or sent to Redis.
    fn read(bytes: &[u8]) -> Result<Fields, crate::Error> {
        let fields = Fields::parse(bytes)?;
        fields.check()?;
        Ok(fields)
    }

    fn check(&self) -> Result<(), crate::Error> {
        self.partition()?;
        if let Some(id) = self.id() {
            ids::dead_letter_id(id)?;
        }
        Ok(())
    }

    fn partition(&self) -> Result<Option<u16>, crate::Error> {
        match self.partition.trim() {
            "" => Ok(None),
            text => ids::partition_field(text).map(Some),
        }
    }

    fn id(&self) -> Option<&str> {
        Some(self.id.trim()).filter(|id| !id.is_empty())
    }

    fn lane(&self) -> Option<String> {
        Some(self.lane.trim().to_owned()).filter(|lane| !lane.is_empty())
    }

    fn dead_letter_query(&self) -> Result<DeadLetterQuery, crate::Error> {
        let id = self.id().map(str::to_owned);
        if id.is_none() && self.all != "1" {
            return Err(crate::Error::BadRequest(
                "say which dead letters to replay: id=<dead letter ID>, or all=1".to_owned(),
            ));
        }
        Ok(DeadLetterQuery {
            partition: self.partition()?,
            lane: self.lane(),
            limit: if id.is_some() { 1 } else { REPLAY_ALL_LIMIT },
            id,
        })
    }

    /// The query string that selects the same thing again (for the form).
    fn hidden(&self) -> Vec<(&'static str, String)> {
        [
            ("partition", &self.partition),
            ("lane", &self.lane),
            ("id", &self.id),
            ("all", &self.all),
        ]
        .into_iter()
        .filter(|(_, value)| !value.is_empty())
        .map(|(name, value)| (name, value.clone()))
        .collect()
    }
}

/// Where to go after an action: the partition's page, or the queue's.
fn back_to(dashboard: &Dashboard, queue: &str, partition: Option<u16>) -> String {
    let base = &dashboard.inner.options.mounted_at;
    match partition {
        Some(p) => format!("{base}/queues/{queue}/partitions/{p}"),
        None => format!("{base}/queues/{queue}"),
    }
}

/// What a confirmation page lists: one line per thing the action touches.
#[derive(Debug, Serialize)]
struct PlanRow {
    what: String,
    job_id: String,
    detail: String,
    /// What the action will do to it.
    will: String,
}

/// `GET /queues/{queue}/replay?id=…|all=1[&partition=N][&lane=L]`: the dry run.
pub(super) async fn confirm_replay(
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
    Path(queue): Path<String>,
    RawQuery(query): RawQuery,
) -> Response {
    // Viewing what an action would do needs the operator too (no CSRF: it writes nothing).
    if let Err(refusal) = authorize_view(&dashboard, &headers) {
        return refusal.into_response();
    }
    let page = async {
        let fields = Fields::read(query.unwrap_or_default().as_bytes())?;
        let target = dashboard.queue(&queue)?;
        let config = target.config();
        let selection = fields.dead_letter_query()?;
        let mut conn = dashboard.inner.redis.shared();
        let letters = dead_letters(&mut conn, config, &selection).await?;
        let replayed = replayed_as(&mut conn, config, &letters).await?;
        let mut appended = 0;
        let rows: Vec<PlanRow> = letters
            .iter()
            .zip(replayed)
            .map(|(letter, replayed)| PlanRow {
                what: format!("dead letter {} (partition {})", letter.id, letter.place()),
                job_id: letter.field("job_id").to_owned(),
                detail: format!("{}: {}", letter.field("reason"), letter.field("detail")),
                will: match replayed {
                    Some(ready_id) => format!("nothing: already replayed as {ready_id}"),
                    None => {
                        appended += 1;
                        format!(
                            "append to {} as attempt 1 (the dead letter stays as the record)",
                            config.ready_key(letter.stream)
                        )
                    }
                },
            })
            .collect();
        let more = letters.len() == REPLAY_ALL_LIMIT;
        Ok::<_, crate::Error>(context! {
            title => format!("Replay {} dead letter(s) of queue {queue}?", rows.len()),
            summary => format!(
                "{appended} job(s) will be appended to the ready stream{}.{}",
                if appended < rows.len() { ", the rest were replayed already" } else { "" },
                if more { format!(" Only the newest {REPLAY_ALL_LIMIT} are taken; replay again for the rest.") } else { String::new() }
            ),
            rows => rows,
            action => format!("{}/queues/{queue}/replay", dashboard.inner.options.mounted_at),
            hidden => fields.hidden(),
            button => "Replay",
            ask_reason => false,
            nothing_to_do => appended == 0,
            back => back_to(&dashboard, &queue, fields.partition()?),
        })
    };
    match page.await {
        Ok(page) => dashboard.render_page(&headers, "confirm.html", page),
        Err(err) => dashboard.error_page(&headers, &err),
    }
}

/// Replayed, or found replayed already, one dead letter.
#[derive(Debug, Serialize)]
struct ReplayOutcome {
    dead_id: String,
    partition: Partition,
    #[serde(skip_serializing_if = "Option::is_none")]
    lane: Option<Cow<'static, str>>,
    job_id: String,
    ready_id: String,
    already: bool,
}

/// `POST /queues/{queue}/replay`: replays what the confirmation listed.
pub(super) async fn replay(
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
    Path(queue): Path<String>,
    body: Bytes,
) -> Response {
    let (operator, fields) = match authorized_form(&dashboard, &headers, &body) {
        Ok(authorized) => authorized,
        Err(answer) => return *answer,
    };
    let done = async {
        let nothing = |err: crate::Error| (Vec::new(), err);
        let target = dashboard.queue(&queue).map_err(nothing)?;
        let config = target.config();
        let selection = fields.dead_letter_query().map_err(nothing)?;
        let mut conn = dashboard.inner.redis.shared();
        let letters = dead_letters(&mut conn, config, &selection)
            .await
            .map_err(|err| nothing(err.into()))?;
        let mut outcomes = Vec::with_capacity(letters.len());
        for letter in &letters {
            let moved = transitions::replay(
                &mut conn,
                config,
                letter.stream,
                &letter.id,
                None,
                &target.accepted_schemas,
            )
            .await;
            match moved {
                Ok(moved) => outcomes.push(ReplayOutcome {
                    dead_id: letter.id.clone(),
                    partition: letter.partition,
                    lane: letter.lane.clone(),
                    job_id: letter.field("job_id").to_owned(),
                    ready_id: moved.id,
                    already: moved.already,
                }),
                // Stop at the first refusal: what was replayed stays replayed
                // (each replay is atomic and safe to run again).
                Err(err) => return Err((outcomes, crate::Error::from(err))),
            }
        }
        Ok(outcomes)
    };
    let target = match fields.id.trim() {
        "" => format!(
            "all dead letters{}{}",
            fields
                .partition
                .is_empty()
                .then(String::new)
                .unwrap_or_else(|| format!(" of partition {}", fields.partition)),
            fields
                .lane()
                .map(|lane| format!(" in lane {lane}"))
                .unwrap_or_default()
        ),
        id => format!("dead letter {id}"),
    };
    let back = back_to(&dashboard, &queue, fields.partition().ok().flatten());
    let (outcomes, failure) = match done.await {
        Ok(outcomes) => (outcomes, None),
        Err((outcomes, err)) => (outcomes, Some(err)),
    };
    let fresh = outcomes.iter().filter(|o| !o.already).count();
    let already = outcomes.len() - fresh;
    let mut outcome = format!("replayed {fresh}");
    if already > 0 {
        outcome.push_str(&format!(" ({already} replayed already)"));
    }
    if let [one] = outcomes.as_slice() {
        outcome.push_str(&format!(
            ": job {} as ready entry {}",
            one.job_id, one.ready_id
        ));
    }
    if let Some(err) = &failure {
        outcome.push_str(&format!("; then failed: {err:#}"));
    }
    dashboard.inner.actions.record(ActionRecord {
        at_ms: queuegen_runtime::host::now_ms(),
        who: operator.who.clone(),
        action: "replay",
        queue: queue.clone(),
        target: target.clone(),
        outcome: outcome.clone(),
    });
    finish(
        &dashboard,
        &operator,
        &back,
        format!("{target}: {outcome}"),
        failure,
        Json(outcomes),
    )
}

/// Authorizes a POST, then reads its form: a refused request gets the
/// refusal whatever its body holds; an authorized one that is malformed, a 400.
fn authorized_form(
    dashboard: &Dashboard,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(Operator, Fields), Box<Response>> {
    let parsed = Fields::parse(body);
    let csrf = parsed.as_ref().map_or("", |fields| fields.csrf.as_str());
    let operator = dashboard
        .authorize(headers, Some(csrf))
        .map_err(|refusal| Box::new(refusal.into_response()))?;
    let checked = parsed.and_then(|fields| fields.check().map(|()| fields));
    match checked {
        Ok(fields) => Ok((operator, fields)),
        Err(err) if operator.is_browser() => Err(Box::new(dashboard.error_page(headers, &err))),
        Err(err) => Err(Box::new(err.json())),
    }
}

/// Answers a finished action: a browser goes back with a message; a script
/// gets JSON (the outcome, or `{"error": …}`).
fn finish(
    dashboard: &Dashboard,
    operator: &Operator,
    back: &str,
    message: String,
    failure: Option<crate::Error>,
    json: impl IntoResponse,
) -> Response {
    if operator.is_browser() {
        dashboard.flash(operator, message);
        return Redirect::to(back).into_response();
    }
    match failure {
        Some(err) => err.json(),
        None => json.into_response(),
    }
}

fn authorize_view(
    dashboard: &Dashboard,
    headers: &HeaderMap,
) -> Result<Operator, super::auth::Refusal> {
    // A GET carries no form: the CSRF check is for changes only.
    let operator = dashboard.operator(headers);
    match (operator, dashboard.inner.options.operator_token.is_some()) {
        (Some(operator), _) => Ok(operator),
        (None, false) => Err(super::auth::Refusal::ReadOnly),
        (None, true) => Err(super::auth::Refusal::Unauthenticated),
    }
}

/// Pause or resume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Switch {
    Pause,
    Resume,
}

impl Switch {
    fn name(self) -> &'static str {
        match self {
            Switch::Pause => "pause",
            Switch::Resume => "resume",
        }
    }
}

/// `GET /queues/{queue}/pause[?partition=N]`: what pausing would change.
pub(super) async fn confirm_pause(
    state: State<Dashboard>,
    headers: HeaderMap,
    queue: Path<String>,
    query: RawQuery,
) -> Response {
    confirm_switch(Switch::Pause, state, headers, queue, query).await
}

/// `GET /queues/{queue}/resume[?partition=N]`: what resuming would change.
pub(super) async fn confirm_resume(
    state: State<Dashboard>,
    headers: HeaderMap,
    queue: Path<String>,
    query: RawQuery,
) -> Response {
    confirm_switch(Switch::Resume, state, headers, queue, query).await
}

async fn confirm_switch(
    switch: Switch,
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
    Path(queue): Path<String>,
    RawQuery(query): RawQuery,
) -> Response {
    if let Err(refusal) = authorize_view(&dashboard, &headers) {
        return refusal.into_response();
    }
    let page = async {
        let fields = Fields::read(query.unwrap_or_default().as_bytes())?;
        let target = dashboard.queue(&queue)?;
        let partitions = selected_partitions(target.config(), fields.partition()?)?;
        let report = status_of(
            &dashboard.inner.redis,
            std::slice::from_ref(&target.watched),
        )
        .await?;
        let status = &report.queues[0];
        let mut changed = 0;
        let rows: Vec<PlanRow> = partitions
            .iter()
            .map(|&p| {
                let note = status
                    .partitions
                    .iter()
                    .find(|row| row.partition == p)
                    .and_then(|row| row.paused.clone());
                let key = target.config().paused_key(p);
                let will = match (switch, note) {
                    (Switch::Pause, None) => {
                        changed += 1;
                        format!("set {key}: workers stop reading new entries within about a read block; recovery, acks, retries and producers carry on")
                    }
                    (Switch::Pause, Some(note)) => format!("already paused by {}: the note is replaced with yours", note.by),
                    (Switch::Resume, Some(note)) => {
                        changed += 1;
                        format!("delete {key} (paused by {}{}): workers read new entries again", note.by,
                            if note.reason.is_empty() { String::new() } else { format!(": {}", note.reason) })
                    }
                    (Switch::Resume, None) => "nothing: not paused".to_owned(),
                };
                PlanRow {
                    what: format!("partition {p}"),
                    job_id: String::new(),
                    detail: String::new(),
                    will,
                }
            })
            .collect();
        let verb = switch.name();
        Ok::<_, crate::Error>(context! {
            title => format!("{} {} partition(s) of queue {queue}?", capitalized(verb), partitions.len()),
            summary => format!("{changed} partition(s) will change."),
            rows => rows,
            action => format!("{}/queues/{queue}/{verb}", dashboard.inner.options.mounted_at),
            hidden => fields.hidden(),
            button => capitalized(verb),
            ask_reason => switch == Switch::Pause,
            nothing_to_do => changed == 0 && switch == Switch::Resume,
            back => back_to(&dashboard, &queue, None),
        })
    };
    match page.await {
        Ok(page) => dashboard.render_page(&headers, "confirm.html", page),
        Err(err) => dashboard.error_page(&headers, &err),
    }
}

fn capitalized(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

fn selected_partitions(
    config: &queuegen_runtime::QueueConfig,
    partition: Option<u16>,
) -> Result<Vec<Partition>, crate::Error> {
    Ok(config.chosen_partitions(partition.as_slice())?)
}

/// `POST /queues/{queue}/pause` (`partition`, `reason`).
pub(super) async fn pause(
    state: State<Dashboard>,
    headers: HeaderMap,
    queue: Path<String>,
    body: Bytes,
) -> Response {
    switch(Switch::Pause, state, headers, queue, body).await
}

/// `POST /queues/{queue}/resume` (`partition`).
pub(super) async fn resume(
    state: State<Dashboard>,
    headers: HeaderMap,
    queue: Path<String>,
    body: Bytes,
) -> Response {
    switch(Switch::Resume, state, headers, queue, body).await
}

async fn switch(
    switch: Switch,
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
    Path(queue): Path<String>,
    body: Bytes,
) -> Response {
    let (operator, fields) = match authorized_form(&dashboard, &headers, &body) {
        Ok(authorized) => authorized,
        Err(answer) => return *answer,
    };
    let done = async {
        let target = dashboard.queue(&queue)?;
        let config = target.config();
        let partitions = selected_partitions(config, fields.partition()?)?;
        let mut conn = dashboard.inner.redis.shared();
        let changes = match switch {
            Switch::Pause => {
                pause::pause(
                    &mut conn,
                    config,
                    &partitions,
                    &operator.who,
                    fields.reason.trim(),
                )
                .await?
                .1
            }
            Switch::Resume => pause::resume(&mut conn, config, &partitions).await?,
        };
        Ok::<_, crate::Error>((partitions, changes))
    };
    let result = done.await;
    let target = match fields.partition.trim() {
        "" => "every partition".to_owned(),
        p => format!("partition {p}"),
    };
    let verb = switch.name();
    let (outcome, failure, json) = match result {
        Ok((partitions, changes)) => {
            let before = changes
                .iter()
                .filter(|change| change.before.is_some())
                .count();
            let outcome = match switch {
                Switch::Pause => format!(
                    "paused {} partition(s){}",
                    partitions.len(),
                    if before > 0 {
                        format!(" ({before} paused already)")
                    } else {
                        String::new()
                    }
                ),
                Switch::Resume => format!("resumed {before} of {} partition(s)", partitions.len()),
            };
            (outcome, None, Json(changes).into_response())
        }
        Err(err) => (format!("failed: {err:#}"), Some(err), ().into_response()),
    };
    dashboard.inner.actions.record(ActionRecord {
        at_ms: queuegen_runtime::host::now_ms(),
        who: operator.who.clone(),
        action: verb,
        queue: queue.clone(),
        target: target.clone(),
        outcome: outcome.clone(),
    });
    let back = back_to(&dashboard, &queue, None);
    finish(
        &dashboard,
        &operator,
        &back,
        format!("{target}: {outcome}"),
        failure,
        json,
    )
}

/// `GET /actions`: the actions taken through this dashboard, newest first.
pub(super) async fn log_page(State(dashboard): State<Dashboard>, headers: HeaderMap) -> Response {
    let records = dashboard.inner.actions.newest_first();
    dashboard.render_page(
        &headers,
        "actions.html",
        context! { records => records, kept => LOG_KEPT },
    )
}
