//! The failure suite's pipeline: the tests spec's `docs` pipeline (split -> page and cover -> merge) with handlers that record each job's effect once, and that record read back.
//!
//! Every handler makes its effect idempotent by `job_id`, as the contract
//! asks of a handler: the effect is `HSETNX` of its stage and job ID in
//! [`DONE_KEY`], and each delivery is counted in [`DELIVERIES_KEY`]. So a
//! job delivered again applies nothing, and what the runtime must get right
//! shows in what is recorded: a job handed on under a new ID (a parent that
//! derived other IDs when delivered again) is an effect nobody expected, a
//! job never handed on is a missing effect, a join published twice is two
//! entries in its stream. The merge handler records its summary's size.

use std::collections::{BTreeMap, BTreeSet};

use queuegen_runtime::envelope::run_fields;
use queuegen_runtime::runs::{child_job_id, join_job_id, RunSummary, Step};
use queuegen_runtime::{Connection, FieldMap, JobContext, JobError, QueueConfig, Redis};
use redis::streams::StreamRangeReply;
use redis::AsyncCommands;

use crate::queues::envelopes::{MergeJob, PartJob, SplitJob};
use crate::queues::{cover, merge, page, split};
use crate::support::{spawn_worker, RunningWorker};

/// `<stage>|<job_id>` -> 1, set once: the effects.
pub const DONE_KEY: &str = "qgtest:pl:done";
/// `<stage>|<job_id>` -> deliveries that reached the handler.
pub const DELIVERIES_KEY: &str = "qgtest:pl:deliveries";
/// run ID -> how many jobs its merge's summary named (the last delivery's).
pub const SUMMARIES_KEY: &str = "qgtest:pl:summaries";

/// The stages, in pipeline order.
pub const STAGES: [&str; 4] = ["split", "page", "cover", "merge"];

/// The queue configurations of the stages, as generated.
pub fn configs() -> [QueueConfig; 4] {
    [split::CONFIG, page::CONFIG, cover::CONFIG, merge::CONFIG]
}

/// The handler of every stage: records each job's effect once.
#[derive(Clone)]
pub struct Recorded {
    conn: Connection,
}

impl Recorded {
    pub fn new(redis: &Redis) -> Recorded {
        Recorded {
            conn: redis.shared(),
        }
    }

    async fn apply(&self, stage: &str, ctx: &JobContext) -> Result<(), JobError> {
        let field = format!("{stage}|{}", ctx.job_id());
        let mut conn = self.conn.clone();
        let _: i64 = conn.hincr(DELIVERIES_KEY, &field, 1).await?;
        let _: bool = conn.hset_nx(DONE_KEY, &field, 1).await?;
        Ok(())
    }
}

impl split::Handler for Recorded {
    async fn handle(&self, job: SplitJob, ctx: &JobContext) -> Result<Step<split::Next>, JobError> {
        self.apply("split", ctx).await?;
        Ok(Step::hand_on(split::Next {
            page: (0..job.pages).map(|page| PartJob { page }).collect(),
            cover: vec![PartJob { page: 0 }],
            merge: MergeJob {
                doc: ctx.job_id().to_owned(),
            },
        }))
    }
}

impl page::Handler for Recorded {
    async fn handle(&self, job: PartJob, ctx: &JobContext) -> Result<Step<page::Next>, JobError> {
        self.apply("page", ctx).await?;
        Ok(Step::done().with_result(format!("page-{}", job.page)))
    }
}

impl cover::Handler for Recorded {
    async fn handle(&self, _job: PartJob, ctx: &JobContext) -> Result<Step<cover::Next>, JobError> {
        self.apply("cover", ctx).await?;
        Ok(Step::done().with_result("cover"))
    }
}

impl merge::Handler for Recorded {
    async fn handle(
        &self,
        _job: MergeJob,
        summary: RunSummary,
        ctx: &JobContext,
    ) -> Result<Step<merge::Next>, JobError> {
        let mut conn = self.conn.clone();
        let _: i64 = conn
            .hset(SUMMARIES_KEY, ctx.run_id(), summary.jobs.len())
            .await?;
        self.apply("merge", ctx).await?;
        Ok(Step::done())
    }
}

/// Starts the workers of `stages` (names of [`STAGES`]) in this process.
pub fn start(redis: &Redis, stages: &[&str], consumer: &str) -> Vec<RunningWorker> {
    let handler = Recorded::new(redis);
    stages
        .iter()
        .map(|stage| {
            let name = format!("{consumer}-{stage}");
            match *stage {
                "split" => spawn_worker(split::worker(redis, handler.clone()).consumer_name(name)),
                "page" => spawn_worker(page::worker(redis, handler.clone()).consumer_name(name)),
                "cover" => spawn_worker(cover::worker(redis, handler.clone()).consumer_name(name)),
                "merge" => spawn_worker(merge::worker(redis, handler.clone()).consumer_name(name)),
                other => panic!("no stage {other} in the docs pipeline"),
            }
        })
        .collect()
}

/// One document of a scenario: its run ID (the split job's) and pages.
#[derive(Debug, Clone)]
pub struct Document {
    pub run_id: String,
    pub pages: u32,
}

impl Document {
    /// `count` documents of 0 to 3 pages.
    pub fn many(prefix: &str, count: usize) -> Vec<Document> {
        (0..count)
            .map(|n| Document {
                run_id: format!("{prefix}-{n}"),
                pages: (n % 4) as u32,
            })
            .collect()
    }

    /// Every effect the run must apply once: `<stage>|<job_id>`.
    pub fn expected_effects(&self) -> Vec<String> {
        let run = &self.run_id;
        let mut effects = vec![format!("split|{run}")];
        for index in 0..self.pages {
            effects.push(format!("page|{}", child_job_id(run, run, "page", index)));
        }
        effects.push(format!("cover|{}", child_job_id(run, run, "cover", 0)));
        effects.push(format!("merge|{}", join_job_id(run, "merge")));
        effects
    }
}

/// What the handlers recorded.
#[derive(Debug, Default)]
pub struct Record {
    pub done: BTreeSet<String>,
    pub deliveries: BTreeMap<String, u64>,
    pub summaries: BTreeMap<String, u64>,
    /// How many times each run's merge job was appended to a merge stream.
    pub merge_entries: BTreeMap<String, u64>,
}

impl Record {
    /// Reads the record and every merge stream, as the default user.
    pub async fn read(admin: &Redis) -> Record {
        let mut conn = admin.shared();
        let done: BTreeMap<String, String> = conn.hgetall(DONE_KEY).await.unwrap();
        let deliveries: BTreeMap<String, u64> = conn.hgetall(DELIVERIES_KEY).await.unwrap();
        let summaries: BTreeMap<String, u64> = conn.hgetall(SUMMARIES_KEY).await.unwrap();
        let mut merge_entries = BTreeMap::new();
        let config = merge::CONFIG;
        for key in config.ready_keys() {
            let reply: StreamRangeReply = conn.xrange_all(&key).await.unwrap();
            for entry in reply.ids {
                let fields = FieldMap::from_stream_map("MergeJob", &entry.map).unwrap();
                let run: String = fields.field(run_fields::RUN_ID, None).unwrap();
                *merge_entries.entry(run).or_insert(0) += 1;
            }
        }
        Record {
            done: done.into_keys().collect(),
            deliveries,
            summaries,
            merge_entries,
        }
    }

    /// What went wrong for `documents`: the effects lost, the duplicates
    /// (effects under IDs no run derives, and joins published more than
    /// once), and a line for each of those and for each summary of the
    /// wrong size.
    pub fn judge(&self, documents: &[Document]) -> Judged {
        let mut judged = Judged::default();
        let expected: BTreeSet<String> = documents
            .iter()
            .flat_map(Document::expected_effects)
            .collect();
        for missing in expected.difference(&self.done) {
            judged.lost += 1;
            judged
                .problems
                .push(format!("lost: no effect of {missing}"));
        }
        for extra in self.done.difference(&expected) {
            judged.duplicates += 1;
            judged.problems.push(format!(
                "duplicate: an effect of {extra}, a job handed on under an ID no run derives"
            ));
        }
        for document in documents {
            let run = &document.run_id;
            let published = self.merge_entries.get(run).copied().unwrap_or(0);
            if published > 1 {
                judged.duplicates += published - 1;
            }
            if published != 1 {
                judged.problems.push(format!(
                    "run {run}: its merge job was published {published} times"
                ));
            }
            let named = self.summaries.get(run).copied().unwrap_or(0);
            let waited = u64::from(document.pages) + 1;
            if named != waited {
                judged.problems.push(format!(
                    "run {run}: the merge's summary named {named} jobs, not its {waited} pages and cover"
                ));
            }
        }
        judged
    }

    /// Deliveries beyond the first, over every job: a crash was recovered.
    pub fn redeliveries(&self) -> u64 {
        self.deliveries.values().map(|n| n.saturating_sub(1)).sum()
    }
}

/// [`Record::judge`]'s findings.
#[derive(Debug, Default)]
pub struct Judged {
    pub lost: u64,
    pub duplicates: u64,
    pub problems: Vec<String>,
}
