//! What a stage's handler hands on, and how it is published: typed envelopes in, derived IDs and deduplicated appends out.

use crate::config::MarkerKind;
use crate::envelope::{Envelope, RunLink};
use crate::error::{PipelineError, Result};
use crate::functions::Function;
use crate::outcome::Outcome;
use crate::packed::EntryArgs;
use crate::producer::{self, Encoded, NewJob};
use crate::stream_slot::StreamSlot;
use crate::transitions;

use super::batched::{self, PublishRequest};
use super::ids::{child_job_id, join_job_id};
use super::pipeline::PipelineRuntime;

/// Most envelopes of one `publish_batch` call.
const MAX_PUBLISH_BATCH: usize = queuegen_core::wire::library::MAX_PUBLISH_BATCH as usize;

/// Children handed to one partition stream of one stage: their indexes in
/// the hand-off, in order.
#[derive(Debug, PartialEq)]
struct Batch {
    stage: &'static str,
    stream: StreamSlot,
    children: Vec<usize>,
}

/// The children, given by the stage and partition stream each goes to,
/// grouped into one batch per stream in the order first handed on, each at
/// most `MAX_PUBLISH_BATCH` long.
fn batches(children: impl Iterator<Item = (&'static str, StreamSlot)>) -> Vec<Batch> {
    let mut batches: Vec<Batch> = Vec::new();
    for (i, (stage, stream)) in children.enumerate() {
        let open = batches.iter_mut().rev().find(|batch| {
            batch.stage == stage
                && batch.stream == stream
                && batch.children.len() < MAX_PUBLISH_BATCH
        });
        match open {
            Some(batch) => batch.children.push(i),
            None => batches.push(Batch {
                stage,
                stream,
                children: vec![i],
            }),
        }
    }
    batches
}

/// What a stage's handler decided for its job.
#[derive(Debug, Clone, PartialEq)]
pub enum Step<N> {
    /// The job's effect is durable: publish `next` (the jobs it hands on,
    /// typed by the stages in its `then`), settle the job at its joins,
    /// then ack it. `result` is what the job's result is known by, for a
    /// join's summary (at most `MAX_RESULT_REF_BYTES`).
    HandOn { next: N, result: Option<String> },
    /// Anything else a handler may answer ([`Outcome`]): a retry, a dead
    /// letter, a reconcile. `Outcome::Done` hands on nothing.
    Outcome(Outcome),
}

impl<N> Step<N> {
    /// Hands on `next`.
    pub fn hand_on(next: N) -> Self {
        Step::HandOn { next, result: None }
    }

    /// Names the job's result for the summary of the joins that wait for it.
    pub fn with_result(self, result: impl Into<String>) -> Self {
        match self {
            Step::HandOn { next, .. } => Step::HandOn {
                next,
                result: Some(result.into()),
            },
            other => other,
        }
    }
}

impl Step<()> {
    /// Done, handing nothing on: the job settles at its joins and is acked.
    pub fn done() -> Self {
        Step::hand_on(())
    }
}

impl<N> From<Outcome> for Step<N> {
    fn from(outcome: Outcome) -> Self {
        Step::Outcome(outcome)
    }
}

/// The jobs one job of a stage hands on: generated for each stage as a
/// struct with one field per stage of its `then` (`Vec` of that stage's
/// envelope) and, for the first stage, one per join (its envelope).
/// `()` hands on nothing.
pub trait HandOn: Send + 'static {
    /// How many jobs it hands on, over every stage (`max_children` bounds it).
    fn count(&self) -> usize;

    /// Hands every job to `to`, which encodes and checks each at once and
    /// publishes them all only once every one has passed.
    fn hand_on(self, to: &mut Handoff<'_>) -> Result<()>;
}

impl HandOn for () {
    fn count(&self) -> usize {
        0
    }

    fn hand_on(self, _to: &mut Handoff<'_>) -> Result<()> {
        Ok(())
    }
}

/// One job's hand-off in progress: encodes its children under derived IDs,
/// publishes them together, and keeps what the settle step needs (the
/// children's IDs, and the first stage's join envelopes).
pub struct Handoff<'a> {
    pipeline: &'a PipelineRuntime,
    stage: &'a str,
    run_id: &'a str,
    job_id: &'a str,
    tenant: &'a str,
    trace_id: &'a str,
    /// Every job handed on so far: its stage and its ID.
    pub(crate) children: Vec<(&'static str, String)>,
    /// Their entries, encoded and checked, in `children` order.
    encoded: Vec<Encoded>,
    /// The first stage's join envelopes, by join, as encoded pairs.
    pub(crate) join_envelopes: Vec<(&'static str, Vec<(&'static str, String)>)>,
}

impl<'a> Handoff<'a> {
    pub(crate) fn new(
        pipeline: &'a PipelineRuntime,
        stage: &'a str,
        run_id: &'a str,
        job_id: &'a str,
        tenant: &'a str,
        trace_id: &'a str,
    ) -> Self {
        Handoff {
            pipeline,
            stage,
            run_id,
            job_id,
            tenant,
            trace_id,
            children: Vec::new(),
            encoded: Vec::new(),
            join_envelopes: Vec::new(),
        }
    }

    fn link(&self) -> RunLink {
        RunLink {
            run_id: self.run_id.to_owned(),
            parent: self.job_id.to_owned(),
        }
    }

    /// Hands `jobs` to `stage` (one of this stage's `then`): the `i`th
    /// under [`child_job_id`] of (run, this job, stage, i), with this job's
    /// tenant and trace. Encoded and checked now (size, lane, partition
    /// keys); published by [`Handoff::send`] with the rest.
    pub fn publish<E: Envelope>(&mut self, stage: &'static str, jobs: Vec<E>) -> Result<()> {
        self.check_next(stage)?;
        let config = self.pipeline.config(stage)?;
        let link = self.link();
        for (index, body) in jobs.into_iter().enumerate() {
            let id = child_job_id(self.run_id, self.job_id, stage, index as u32);
            let job = NewJob::new(id.clone(), self.tenant, body)
                .with_trace_id(self.trace_id)
                .in_run(link.clone());
            self.encoded.push(producer::encode(config, job, index)?);
            self.children.push((stage, id));
        }
        Ok(())
    }

    /// Publishes every job handed on: one request per partition stream
    /// handed to (the stages handed to have `dedup`, which `check`
    /// requires), sent with those of the process's other hand-offs that
    /// wait with them (one `publish_batch` per stream). A parent delivered
    /// again publishes the same IDs, and the markers absorb them. Admission
    /// does not apply: refusing a hand-off would only run the parent's
    /// handler again.
    pub(crate) async fn send(&self) -> Result<()> {
        if self.encoded.is_empty() {
            return Ok(());
        }
        let mut requests = Vec::new();
        let streams = self.children.iter().zip(&self.encoded);
        for batch in batches(streams.map(|((stage, _), job)| (*stage, job.stream))) {
            let config = self.pipeline.config(batch.stage)?;
            let window = config
                .dedup
                .map(|dedup| dedup.window)
                .ok_or_else(|| self.no_dedup(batch.stage))?;
            let jobs = batch
                .children
                .iter()
                .map(|&i| {
                    let job_id = self.children[i].1.as_str();
                    let envelope =
                        EntryArgs::of_pairs(config.payload.shape, &self.encoded[i].pairs);
                    (
                        config.marker_key(batch.stream, MarkerKind::Publish, job_id),
                        batched::items(&envelope),
                    )
                })
                .collect();
            requests.push(PublishRequest {
                function: config.function(Function::PublishBatch),
                partition: config.partition_of_stream(batch.stream),
                ready_key: config.ready_key(batch.stream),
                window_ms: transitions::window_ms(window),
                payload_max_bytes: config.payload.max_bytes,
                jobs,
                first_child: self.children[batch.children[0]].1.clone(),
            });
        }
        let publishes = self.pipeline.publishes();
        let sent = requests.into_iter().map(|request| {
            publishes.send(request, || {
                format!(
                    "handing on {} jobs of job {:?} of pipeline {}",
                    self.encoded.len(),
                    self.job_id,
                    self.pipeline.name()
                )
            })
        });
        for result in futures_util::future::join_all(sent).await {
            result?;
        }
        Ok(())
    }

    /// Keeps `body` as the envelope of `join`'s job, published by the join
    /// once the run has ended there. Only the first stage's job hands on
    /// join envelopes, one per join of the pipeline.
    pub fn join<E: Envelope>(&mut self, join: &'static str, body: E) -> Result<()> {
        let graph = self.pipeline.graph();
        if self.stage != graph.first {
            return Err(self.join_problem(format!(
                "handed on an envelope for join {join}; only the first stage ({}) does",
                graph.first
            )));
        }
        if !graph.joins().any(|(stage, _)| stage.queue == join) {
            return Err(self.join_problem(format!("{join} is not a join of the pipeline")));
        }
        let config = self.pipeline.config(join)?;
        let job = NewJob::new(join_job_id(self.run_id, join), self.tenant, body)
            .with_trace_id(self.trace_id)
            .in_run(self.link());
        let encoded = producer::encode(config, job, 0)?;
        self.join_envelopes.retain(|(name, _)| *name != join);
        self.join_envelopes.push((join, encoded.pairs));
        Ok(())
    }

    fn check_next(&self, to: &str) -> Result<()> {
        let then = &self
            .pipeline
            .graph()
            .stage(self.stage)
            .expect("a stage worker's stage is in its pipeline")
            .then;
        if then.iter().any(|next| next == to) {
            return Ok(());
        }
        Err(PipelineError::NotNext {
            pipeline: self.pipeline.name().to_owned(),
            stage: self.stage.to_owned(),
            job_id: self.job_id.to_owned(),
            to: to.to_owned(),
            then: then.join(", "),
        }
        .into())
    }

    fn no_dedup(&self, stage: &str) -> crate::Error {
        self.join_problem(format!(
            "hands jobs to {stage}, whose queue has no dedup: a parent delivered again would publish its jobs twice"
        ))
    }

    fn join_problem(&self, problem: String) -> crate::Error {
        PipelineError::JoinEnvelope {
            pipeline: self.pipeline.name().to_owned(),
            stage: self.stage.to_owned(),
            job_id: self.job_id.to_owned(),
            problem,
        }
        .into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn children_are_batched_per_stage_and_stream_in_order_and_split_at_the_limit() {
        let (a, b) = (StreamSlot::new(0), StreamSlot::new(1));
        let given = [("page", a), ("page", b), ("cover", a), ("page", a)];
        assert_eq!(
            batches(given.into_iter()),
            [
                Batch {
                    stage: "page",
                    stream: a,
                    children: vec![0, 3]
                },
                Batch {
                    stage: "page",
                    stream: b,
                    children: vec![1]
                },
                Batch {
                    stage: "cover",
                    stream: a,
                    children: vec![2]
                },
            ]
        );
        let many = batches(std::iter::repeat_n(("page", a), MAX_PUBLISH_BATCH * 2 + 1));
        let sizes: Vec<usize> = many.iter().map(|batch| batch.children.len()).collect();
        assert_eq!(sizes, [MAX_PUBLISH_BATCH, MAX_PUBLISH_BATCH, 1]);
        assert_eq!(many[2].children, [MAX_PUBLISH_BATCH * 2]);
    }
}
