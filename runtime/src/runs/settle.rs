//! Settling one job of a run at every join it concerns: the `run_settle` calls, and a failed join's job settled dead downstream.

use queuegen_core::pipeline::OnDeadLetter;

use crate::error::Result;
use crate::functions::{Function, RunOutcome, RunSettled};
use crate::packed::EntryArgs;
use crate::partition::run_partition;

use super::batched::{self, SettleRequest};
use super::events::{RunEvent, RunEvents};
use super::ids::join_job_id;
use super::pipeline::PipelineRuntime;

/// One job of a run that has ended (its children published, or
/// dead-lettered), to settle at the joins of its stage.
pub(crate) struct Ended<'a> {
    pub stage: &'a str,
    pub run_id: &'a str,
    pub job_id: &'a str,
    pub outcome: RunOutcome,
    pub result_ref: &'a str,
    /// The jobs it handed on: stage and ID.
    pub children: &'a [(&'static str, String)],
    /// The first stage's join envelopes, by join (empty for other stages).
    pub join_envelopes: &'a [(&'static str, Vec<(&'static str, String)>)],
}

/// Settles `job` at every join its stage settles at (`Pipeline::settles_at`),
/// in pipeline order; then, for each join that answered failed, settles
/// that join's own job (counted on by the joins after it) as dead there,
/// and so on downstream. Every call is idempotent, so a job delivered
/// again after a crash settles again with no effect but the missing ones.
pub(crate) async fn settle(
    pipeline: &PipelineRuntime,
    job: &Ended<'_>,
    events: &RunEvents,
) -> Result<()> {
    let graph = pipeline.graph();
    // A dead first-stage job has no join envelopes to open the run with:
    // it fails the run at every join, under either policy.
    let first = job.stage == graph.first;
    let opens = first && job.outcome == RunOutcome::Done;
    let mut failed = Vec::new();
    for join in graph.settles_at(job.stage) {
        let rule = graph
            .stage(join)
            .and_then(|stage| stage.join.as_ref())
            .expect("settles_at names joins");
        let mut children: Vec<String> = job
            .children
            .iter()
            .filter(|(stage, _)| graph.leads_to_join(stage, join))
            .map(|(_, id)| id.clone())
            .collect();
        let mut envelope = None;
        if opens {
            // A join after a join: the earlier join's job is counted on
            // from the start, its ID derived from the run.
            children.extend(
                graph
                    .joins()
                    .map(|(stage, _)| stage.queue.as_str())
                    .filter(|other| *other != join && graph.leads_to_join(other, join))
                    .map(|other| join_job_id(job.run_id, other)),
            );
            envelope = Some(
                job.join_envelopes
                    .iter()
                    .find(|(name, _)| *name == join)
                    .map(|(_, pairs)| pairs)
                    .ok_or_else(|| missing_envelope(pipeline, job, join))?,
            );
        }
        let dead = job.outcome == RunOutcome::Dead;
        let call = Call {
            join,
            job_id: job.job_id,
            outcome: job.outcome,
            counted: rule.after.iter().any(|stage| stage == job.stage),
            fails_run: dead && (first || rule.on_dead_letter == OnDeadLetter::Fail),
            result_ref: job.result_ref,
            children: &children,
            envelope,
        };
        let settled = run_settle(pipeline, job.run_id, &call).await?;
        // A repeat (`already`, `ended`) recorded nothing: only what this
        // call did is counted, so each event is counted once per run.
        let recorded = !matches!(settled, RunSettled::Already | RunSettled::Ended { .. });
        if opens && recorded {
            events.record(pipeline.name(), join, RunEvent::Started);
        }
        record(events, pipeline, join, &settled);
        if matches!(settled, RunSettled::Published { .. }) {
            crate::failpoint::failpoint("after_join_published");
        }
        if settled.failed() {
            failed.push(join);
        }
    }
    // A failed join never publishes its job: settle it dead wherever it is
    // counted on, which may fail those joins in turn (the graph is acyclic).
    let mut done: Vec<&str> = Vec::new();
    while let Some(join) = failed.pop() {
        if done.contains(&join) {
            continue;
        }
        done.push(join);
        let placeholder = join_job_id(job.run_id, join);
        for next in graph.settles_at(join) {
            let rule = graph
                .stage(next)
                .and_then(|stage| stage.join.as_ref())
                .expect("settles_at names joins");
            let call = Call {
                join: next,
                job_id: &placeholder,
                outcome: RunOutcome::Dead,
                counted: rule.after.iter().any(|stage| stage == join),
                fails_run: rule.on_dead_letter == OnDeadLetter::Fail,
                result_ref: "",
                children: &[],
                envelope: None,
            };
            let settled = run_settle(pipeline, job.run_id, &call).await?;
            record(events, pipeline, next, &settled);
            if settled.failed() {
                failed.push(next);
            }
        }
    }
    Ok(())
}

/// Counts what `settled` says this call did at `join`: published or failed it.
fn record(events: &RunEvents, pipeline: &PipelineRuntime, join: &str, settled: &RunSettled) {
    match settled {
        RunSettled::Published { .. } => events.record(pipeline.name(), join, RunEvent::Published),
        RunSettled::Failed => events.record(pipeline.name(), join, RunEvent::Failed),
        _ => {}
    }
}

/// One `run_settle` at one join.
struct Call<'a> {
    join: &'a str,
    job_id: &'a str,
    outcome: RunOutcome,
    counted: bool,
    fails_run: bool,
    result_ref: &'a str,
    children: &'a [String],
    envelope: Option<&'a Vec<(&'static str, String)>>,
}

async fn run_settle(
    pipeline: &PipelineRuntime,
    run_id: &str,
    call: &Call<'_>,
) -> Result<RunSettled> {
    let config = pipeline.config(call.join)?;
    let partition = run_partition(config, run_id);
    let envelope = call
        .envelope
        .map(|pairs| batched::items(&EntryArgs::of_pairs(config.payload.shape, pairs)));
    let request = SettleRequest {
        function: config.function(Function::RunSettle),
        partition,
        keys: config.run_keys(partition, pipeline.name(), run_id),
        pipeline: pipeline.name().to_owned(),
        run_id: run_id.to_owned(),
        job_id: call.job_id.to_owned(),
        outcome: call.outcome,
        counted: call.counted,
        fails_run: call.fails_run,
        result_ref: call.result_ref.to_owned(),
        keep_ms: pipeline.keep_ms(),
        children: call.children.to_vec(),
        envelope,
    };
    // Sent with the settles of the process's other jobs that wait with it
    // (one call per join partition), answered for this job alone.
    let settled = pipeline
        .settles()
        .send(request, || {
            format!(
                "settling job {} of run {run_id} at join {} of pipeline {}",
                call.job_id,
                call.join,
                pipeline.name()
            )
        })
        .await?;
    match &settled {
        RunSettled::Published { ready_id } => tracing::info!(
            pipeline = pipeline.name(),
            run_id,
            join = call.join,
            stream_id = %ready_id,
            "join published"
        ),
        RunSettled::Failed => tracing::warn!(
            pipeline = pipeline.name(),
            run_id,
            join = call.join,
            job_id = call.job_id,
            "run failed at join: a job it waits for was dead-lettered"
        ),
        _ => {}
    }
    Ok(settled)
}

fn missing_envelope(pipeline: &PipelineRuntime, job: &Ended<'_>, join: &str) -> crate::Error {
    crate::error::PipelineError::JoinEnvelope {
        pipeline: pipeline.name().to_owned(),
        stage: job.stage.to_owned(),
        job_id: job.job_id.to_owned(),
        problem: format!(
            "handed on no envelope for join {join}; the first stage's hand-off names one per join"
        ),
    }
    .into()
}
