//! `queuegen-bench`: the hand-written redis-rs baseline and queuegen's generated
//! producer and workers, measured side by side on fresh keys each round.
//!
//! This file holds the arguments and the run: start (or connect to) Redis
//! and, for baseP / qg8p / --outbox, PostgreSQL, load the Function library,
//! run every variant once per round (or the fleet, outbox or pipeline mode), then
//! print the markdown table and write the JSON report.

mod baseline;
mod cluster_baseline;
mod fleet;
mod outbox;
mod pg;
mod pipeline;
mod probe;
mod queuegen;
mod report;
mod shape;
mod shape_lua;
mod slowlog;
mod stats;
mod steady;
mod telemetry;
mod trim;
mod usage;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Parser;

use crate::probe::RoundResult;
use crate::shape::Shape;

/// Measures queuegen against a hand-written redis-rs work-queue loop.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "queuegen-bench",
    after_help = "Examples:\n  \
        cargo run --release -p queuegen-bench -- --jobs 50000 --rounds 3\n  \
        cargo run --release -p queuegen-bench -- --jobs 50000 --partitions 1\n  \
        cargo run --release -p queuegen-bench -- --jobs 50000 --partitions 64\n  \
        cargo run --release -p queuegen-bench -- --variant base --variant qg8 --rounds 5\n  \
        cargo run --release -p queuegen-bench -- --variant base1 --variant qg1 --variant baseR --variant qg8r\n  \
        cargo run --release -p queuegen-bench -- --rate 2000 --seconds 20 --rounds 1\n  \
        cargo run --release -p queuegen-bench -- --rate 20000 --seconds 20 --variant base --variant qg8\n  \
        cargo run --release -p queuegen-bench -- --fleet 10 --fleet 200 --idle 30 --jobs 100000\n  \
        cargo run --release -p queuegen-bench -- --variant base --variant baseF --variant baseB --variant baseM --variant baseK --variant baseJ --rounds 5\n  \
        cargo run --release -p queuegen-bench -- --variant lua --jobs 50000\n  \
        cargo run --release -p queuegen-bench -- --variant trim\n  \
        cargo run --release -p queuegen-bench -- --variant trim --trim-entries 10000 --trim-entries 5000000\n  \
        cargo run --release -p queuegen-bench -- --cluster --variant base --variant qg8\n  \
        cargo run --release -p queuegen-bench -- --redis redis://127.0.0.1:7000/ --jobs 500000\n  \
        cargo run --release -p queuegen-bench -- --variant baseP --variant qg8p --rounds 3\n  \
        cargo run --release -p queuegen-bench -- --postgres --rounds 3\n  \
        cargo run --release -p queuegen-bench -- --variant baseP --variant qg8p --pg-pool 8 --jobs 50000\n  \
        cargo run --release -p queuegen-bench -- --variant qg8p --postgres-url postgres://app@db:5432/bench\n  \
        cargo run --release -p queuegen-bench -- --outbox --rounds 1\n  \
        cargo run --release -p queuegen-bench -- --outbox --jobs 100000 --rate 5000 --seconds 20\n  \
        cargo run --release -p queuegen-bench -- --pipeline --runs 2000 --rounds 3\n  \
        cargo run --release -p queuegen-bench -- --pipeline --runs 2000 --rounds 3 --slowlog\n  \
        cargo run --release -p queuegen-bench -- --pipeline --runs 1000 --fan-out 1 --stage-workers 2\n\n\
        Without --redis a private redis-server (from $REDIS_SERVER or PATH) is started on a\n\
        free loopback port and stopped at the end; with --cluster, a private 6-node Redis\n\
        Cluster (3 primaries, 3 replicas). A --redis URL may name a Cluster node: the bench\n\
        tells. With --redis nothing is flushed: every variant of every round uses its own\n\
        key prefix and deletes its keys afterwards.\n\n\
        PostgreSQL (baseP, qg8p, --outbox): without --postgres-url a private PostgreSQL\n\
        (initdb + pg_ctl from $PG_BIN or /usr/lib/postgresql/<newest>/bin, as the tests\n\
        find it) is started on a free loopback port, never 5432, with production-like\n\
        durability (fsync=on, synchronous_commit=on, full_page_writes=on), and stopped at\n\
        the end. Either way every PostgreSQL variant and outbox run of every round gets a\n\
        fresh schema (queuegen's migrations + a `documents` table), dropped afterwards."
)]
pub struct Args {
    /// Use this Redis (a server or a Cluster node) instead of starting a private redis-server.
    #[arg(long, value_name = "URL", conflicts_with = "cluster")]
    pub redis: Option<String>,
    /// Start a private 6-node Redis Cluster instead of one redis-server. The
    /// baseline then uses the same partitioned streams as queuegen, and the
    /// report shows each primary's share of the server CPU.
    #[arg(long)]
    pub cluster: bool,
    /// Jobs per variant and round (--outbox: rows of the throughput phase)
    /// [default: 50000; baseP and qg8p: 20000]. The PostgreSQL variants
    /// commit one durable (fsync'd) transaction per job, 4000 to 6500 jobs/s
    /// on 2 cores: 20000 take ~3–5 s per variant and round.
    #[arg(long = "jobs", value_name = "N")]
    pub jobs_given: Option<u64>,
    /// The jobs of the Redis-only variants (from --jobs, or --rate × --seconds).
    #[arg(skip)]
    pub jobs: u64,
    /// The jobs of baseP and qg8p (from --jobs, or --rate × --seconds).
    #[arg(skip)]
    pub pg_jobs: u64,
    /// Partitions of the queuegen queue (on one server the baseline uses one
    /// stream; on a Cluster, this many, with the same hash tags).
    #[arg(long, default_value_t = 4, value_name = "P")]
    pub partitions: u16,
    /// Rounds; each figure is reported as the median over rounds with min–max.
    #[arg(long, default_value_t = 3, value_name = "R")]
    pub rounds: u32,
    /// Where the JSON report goes (`latest.json` in it).
    #[arg(long, default_value = "target/bench", value_name = "DIR")]
    pub out: PathBuf,
    /// Jobs per `publish_many` call and per baseline XADD pipeline.
    #[arg(long, default_value_t = 1_000, value_name = "B")]
    pub batch: usize,
    /// Handler concurrency of each queuegen worker (its read COUNT), in place
    /// of the spec's 8; the baseline reads COUNT 100.
    #[arg(long, default_value_t = 100, value_name = "C")]
    pub concurrency: usize,
    /// Longest wait, in seconds, for any one phase (publish, processing, shutdown).
    #[arg(long, default_value_t = 120, value_name = "SECS")]
    pub timeout: u64,
    /// Run only these variants (repeatable): base, qg8, qg8x, qg8l, baseD, qg8d,
    /// qg8n, qg8m, qg8mt, base1, qg1, baseR, qg8r, baseP, qg8p, trim (qg8x:
    /// qg8 on a queue with retention.on_ack: delete, XACKDEL ACKED per ack
    /// where the server has it, else qg8's XACK again; qg8l:
    /// qg8 with a handler.rate far above what it reaches, the rate limiter's
    /// cost; qg8d: qg8 on a queue with dedup, publish_once per job; qg8n:
    /// qg8 on a queue with two lanes, jobs alternating). Default: all but
    /// trim, baseP and qg8p (with --rate: base, qg8, base1, qg1); --postgres
    /// adds baseP and qg8p. Each queuegen ratio is against its own baseline:
    /// qg1's against base1 (one consumer), qg8r's against baseR (8 consumers
    /// and one result SET per job), qg8d's against baseD (base publishing each
    /// job through a hand-written GET/XADD/SET script), qg8p's against baseP
    /// (8 consumers and one tokio-postgres transaction per job: a documents row
    /// and the marker row), the others' against base; without it, no ratio.
    /// `trim` measures the commands of one trim pass per --trim-entries length.
    /// Entry shapes (issue 28; opt-in, never in the default set): baseF (base's
    /// entry, every field a stream field, decoded into the TestJob envelope per
    /// job), baseB (the header fields the Functions read as stream fields, the
    /// rest one JSON `body` field), baseM (baseB with a MessagePack body),
    /// baseK (one `packed` field: the whole envelope as MessagePack), baseJ
    /// (baseK as JSON); each decodes every entry, ratios against baseF (baseF's
    /// against base). `lua` measures, per shape, the server CPU of a script
    /// that reads one entry by ID and rewrites it as the retry transition does
    /// (--jobs calls).
    #[arg(long = "variant", value_name = "SLUG", value_parser = Variant::parse_slug)]
    pub variants: Vec<Variant>,
    /// Ready-stream lengths the trim variant measures a pass at (repeatable).
    #[arg(long = "trim-entries", value_name = "N", default_values_t = [10_000u64, 1_000_000])]
    pub trim_entries: Vec<u64>,
    /// Steady-state latency instead of draining a backlog: an open-loop
    /// publisher sends R jobs/s on a fixed schedule (for --seconds; --jobs
    /// is then R × S) while the consumers run, and latency is handler start
    /// minus each job's intended send time (p50/p99/p99.9 from an HDR
    /// histogram over every round).
    ///
    /// With --outbox: the lag phase's enqueue rate in rows/s (default 2000).
    #[arg(long, value_name = "R")]
    pub rate: Option<f64>,
    /// Length of the steady-state run, in seconds (with --rate). With
    /// --outbox: the lag phase's length (default 10).
    #[arg(long, value_name = "S")]
    pub seconds: Option<f64>,
    /// Fleet mode instead of the variants: W queuegen workers, each with its
    /// own connection, over 4 queues of 8, 16, 24 and 32 partitions; idle
    /// for --idle seconds (server commands/s and CPU), then a burst of
    /// --jobs jobs (its end-to-end time). One round. Repeatable: each size
    /// runs in turn, one row each, compared with the first.
    #[arg(long, value_name = "W", conflicts_with_all = ["rate", "variants"])]
    pub fleet: Vec<usize>,
    /// Idle window of the fleet mode, in seconds.
    #[arg(long, value_name = "S", default_value_t = 30.0)]
    pub idle: f64,
    /// Add the PostgreSQL variants (baseP, qg8p) to the default set. Implied
    /// by --postgres-url.
    #[arg(long)]
    pub postgres: bool,
    /// Use this PostgreSQL (its database must let the user create schemas)
    /// instead of starting a private one; every round gets a fresh schema,
    /// dropped after. Its durability settings are reported, not changed.
    #[arg(long, value_name = "URL")]
    pub postgres_url: Option<String>,
    /// Connections in each PostgreSQL pool: one pool per baseP consumer and
    /// per qg8p worker (8 × P connections on each side).
    #[arg(long, default_value_t = 4, value_name = "P")]
    pub pg_pool: usize,
    /// An extra setting for the private PostgreSQL (repeatable), e.g.
    /// `log_statement=all` to count a small run's statements.
    #[arg(long = "pg-setting", value_name = "NAME=VALUE", value_parser = parse_setting)]
    pub pg_settings: Vec<(String, String)>,
    /// Outbox mode instead of the variants: rows/s dispatched by 1 and then 2
    /// `OutboxPublisher`s from a backlog of --jobs committed rows, and the
    /// lag from each row's commit to its XADD while rows are enqueued at
    /// --rate rows/s for --seconds, with 1 and 2 publishers. Over the `jobs`
    /// queue with --partitions partitions; every round, both phases.
    #[arg(long, conflicts_with_all = ["fleet", "variants"])]
    pub outbox: bool,
    /// Rows one publisher round sends at most (`OutboxPublisher::batch`).
    #[arg(long, default_value_t = 500, value_name = "B")]
    pub outbox_batch: usize,
    /// How long an idle publisher waits before it asks again
    /// (`OutboxPublisher::idle_poll`), in ms: the bound on an idle outbox's lag.
    #[arg(long, default_value_t = 25, value_name = "MS")]
    pub idle_poll: u64,
    /// Pipeline mode instead of the variants: a three-stage pipeline
    /// (first → middle with a fan-out of --fan-out → a join after middle),
    /// runs/s end to end of queuegen's stage workers (`StageWorker`:
    /// publish_batch per child partition, run_settle per job at the join) against a
    /// hand-written redis-rs chain in the same run (XADD of the children
    /// before XACK, an INCR counter per run for the join, no dedup), with
    /// server CPU, client CPU and commands per run and the commands by name.
    /// Each round publishes --runs first-stage jobs, then works them until
    /// every join is handled. On one server only; --partitions per stage.
    #[arg(long, conflicts_with_all = ["fleet", "variants", "outbox", "rate", "cluster"])]
    pub pipeline: bool,
    /// Runs (first-stage jobs) per side and round of --pipeline.
    #[arg(long, default_value_t = 2_000, value_name = "N")]
    pub runs: u64,
    /// Jobs each first-stage job hands on to the middle stage (--pipeline).
    #[arg(long, default_value_t = 10, value_name = "F")]
    pub fan_out: u32,
    /// Workers (queuegen) and consumers (baseline) per stage (--pipeline),
    /// each with its own connection.
    #[arg(long, default_value_t = 1, value_name = "W")]
    pub stage_workers: usize,
    /// With --pipeline: after the rounds, one more round of each side (at
    /// most 500 runs; not in the medians) with the server's slowlog
    /// recording every command, which gives each FCALL's Function its
    /// calls and server time per run.
    #[arg(long, requires = "pipeline")]
    pub slowlog: bool,
}

/// `NAME=VALUE` of --pg-setting.
fn parse_setting(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.to_owned(), value.to_owned())),
        _ => Err(format!("{text:?} is not NAME=VALUE")),
    }
}

/// --jobs' default for the Redis-only variants and --outbox's backlog.
const DEFAULT_JOBS: u64 = 50_000;
/// --jobs' default for baseP and qg8p: one fsync'd commit per job, 4000 to
/// 6500 jobs/s on a 2-core machine (the Redis-only variants: 50k+), so
/// 20000 keep a round of both near 10 s (50000: near 25 s).
const DEFAULT_PG_JOBS: u64 = 20_000;

impl Args {
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout)
    }
}

/// What each job commits before it is acked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Store {
    /// Nothing: a no-op handler.
    Nothing,
    /// A result in Redis: `SET … NX GET PX` (`RedisResults` for queuegen).
    Redis,
    /// One PostgreSQL transaction: a `documents` row and the job's marker
    /// row in `results` (`PgResults` for queuegen).
    Postgres,
}

impl Store {
    /// The baseline's slug letter (queuegen's is its lower case), and what
    /// the baseline's and queuegen's names add.
    fn parts(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Store::Nothing => ("", "", ""),
            Store::Redis => ("R", " + result SET", " + result store"),
            Store::Postgres => (
                "P",
                " + documents row and marker, one transaction per job",
                " + PgResults (documents row and marker)",
            ),
        }
    }
}

/// What a queuegen variant's queue has beyond the plain `jobs` queue: each
/// is measured against the same baseline, so its ratio is its cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feature {
    Plain,
    /// A `handler.rate` far above what the workers reach
    /// ([`queuegen::LIMITER_RATE`]), so every read round also asks the token
    /// bucket (qg8l).
    RateLimit,
    /// `dedup` ([`queuegen::DEDUP_WINDOW`]): every publish is one
    /// `publish_once` Function call in place of an `XADD` (qg8d).
    Dedup,
    /// Two lanes of equal weight ([`queuegen::TWO_LANES`]), jobs alternating
    /// between them: twice the streams, read by weight (qg8n).
    TwoLanes,
    /// `retention.on_ack: delete` (qg8x): on a server with `XACKDEL` every
    /// ack is `XACKDEL … ACKED` through the library's `ack_delete`, which
    /// deletes the entry with its ack; elsewhere the workers take the `XACK`
    /// path and this is qg8 again.
    DeleteOnAck,
    /// `payload.shape: fields` (qg8f): every header and body field a stream
    /// field of its own, as the baseline writes them, where every other
    /// queuegen variant writes the default, one packed field.
    Fields,
}

impl Feature {
    /// The slug's letter and what the name adds.
    fn parts(self) -> (&'static str, &'static str) {
        match self {
            Feature::Plain => ("", ""),
            Feature::RateLimit => ("l", " + rate limit (never reached)"),
            Feature::Dedup => ("d", " + dedup (publish_once)"),
            Feature::TwoLanes => ("n", " + two lanes"),
            Feature::DeleteOnAck => ("x", " + delete on ack"),
            Feature::Fields => ("f", " + entries as fields"),
        }
    }
}

/// The variants of one round, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    Baseline(Baseline),
    Queuegen(Queuegen),
    /// One trim pass over a partition (`--variant trim` only; not part of the rounds).
    Trim,
    /// The retry transition's entry read and rewrite in Lua, per entry shape
    /// (`--variant lua` only; not part of the rounds).
    LuaRead,
}

/// The hand-written redis-rs loop: 8 consumers (on a Cluster, one per
/// partition, at least 8) or one (`single`), committing `store` per job;
/// with `dedup`, publishing each job through a check-and-append script
/// (marker GET, XADD, marker SET) as a user would write dedup by hand;
/// with a `shape`, writing entries in that shape and decoding each one read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Baseline {
    pub single: bool,
    pub store: Store,
    pub dedup: bool,
    pub shape: Option<Shape>,
}

/// `store`: what each job commits before the handler reports `Done`.
/// `telemetry`: each worker records its metrics into a registry of its
/// own (as one process would). `tracing`: a tracing subscriber (fmt, to
/// a sink) is on at `info`, so the per-job span is built. `feature`:
/// what the queue has beyond the plain `jobs` queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queuegen {
    pub workers: usize,
    pub store: Store,
    pub telemetry: bool,
    pub tracing: bool,
    pub feature: Feature,
}

impl Variant {
    pub const BASE: Variant = Variant::base(false, Store::Nothing, false);
    pub const BASE1: Variant = Variant::base(true, Store::Nothing, false);
    pub const BASE_RESULTS: Variant = Variant::base(false, Store::Redis, false);
    pub const BASE_PG: Variant = Variant::base(false, Store::Postgres, false);
    /// `base` publishing through a hand-written dedup script (baseD): what
    /// qg8d's dedup is compared with, apart from what dedup itself costs.
    pub const BASE_DEDUP: Variant = Variant::base(false, Store::Nothing, true);
    pub const QG1: Variant = Variant::queuegen(1, Store::Nothing, false, false, Feature::Plain);
    pub const QG8: Variant = Variant::qg8_on(Feature::Plain);

    const fn base(single: bool, store: Store, dedup: bool) -> Variant {
        Variant::Baseline(Baseline {
            single,
            store,
            dedup,
            shape: None,
        })
    }

    /// `base` writing entries in `shape` and decoding each one it reads.
    pub const fn shaped(shape: Shape) -> Variant {
        Variant::Baseline(Baseline {
            single: false,
            store: Store::Nothing,
            dedup: false,
            shape: Some(shape),
        })
    }

    const fn queuegen(
        workers: usize,
        store: Store,
        telemetry: bool,
        tracing: bool,
        feature: Feature,
    ) -> Variant {
        Variant::Queuegen(Queuegen {
            workers,
            store,
            telemetry,
            tracing,
            feature,
        })
    }

    /// qg8 (no results store, telemetry or tracing) on a queue with `feature`.
    const fn qg8_on(feature: Feature) -> Variant {
        Variant::queuegen(8, Store::Nothing, false, false, feature)
    }

    /// Every round variant, in the order they run: each queuegen variant
    /// after the baseline its ratio uses; the entry shapes last, opt-in.
    pub const ALL: [Variant; 21] = [
        Variant::BASE,
        Variant::QG8,
        Variant::qg8_on(Feature::Fields),
        Variant::qg8_on(Feature::DeleteOnAck),
        Variant::qg8_on(Feature::RateLimit),
        Variant::BASE_DEDUP,
        Variant::qg8_on(Feature::Dedup),
        Variant::qg8_on(Feature::TwoLanes),
        Variant::queuegen(8, Store::Nothing, true, false, Feature::Plain),
        Variant::queuegen(8, Store::Nothing, true, true, Feature::Plain),
        Variant::BASE1,
        Variant::QG1,
        Variant::BASE_RESULTS,
        Variant::queuegen(8, Store::Redis, false, false, Feature::Plain),
        Variant::BASE_PG,
        Variant::queuegen(8, Store::Postgres, false, false, Feature::Plain),
        Variant::shaped(Shape::Fields),
        Variant::shaped(Shape::BodyJson),
        Variant::shaped(Shape::BodyMsgpack),
        Variant::shaped(Shape::PackedMsgpack),
        Variant::shaped(Shape::PackedJson),
    ];

    /// The variants a steady-state run does by default.
    pub const STEADY: [Variant; 4] = [Variant::BASE, Variant::QG8, Variant::BASE1, Variant::QG1];

    /// The baseline this variant's ratios are against (none for a baseline).
    pub fn reference(self) -> Option<Variant> {
        match self {
            Variant::Baseline(Baseline {
                shape: Some(Shape::Fields),
                ..
            }) => Some(Variant::BASE),
            Variant::Baseline(Baseline { shape: Some(_), .. }) => {
                Some(Variant::shaped(Shape::Fields))
            }
            Variant::Baseline(_) | Variant::Trim | Variant::LuaRead => None,
            Variant::Queuegen(qg) if qg.store != Store::Nothing => {
                Some(Variant::base(false, qg.store, false))
            }
            Variant::Queuegen(qg) if qg.feature == Feature::Dedup => Some(Variant::BASE_DEDUP),
            Variant::Queuegen(qg) if qg.workers == 1 => Some(Variant::BASE1),
            Variant::Queuegen(_) => Some(Variant::BASE),
        }
    }

    pub fn is_baseline(self) -> bool {
        matches!(self, Variant::Baseline(_))
    }

    /// Whether this is an entry-shape variant (opt-in: never in the default set).
    pub fn is_shape(self) -> bool {
        matches!(self, Variant::Baseline(Baseline { shape: Some(_), .. }))
    }

    /// Whether each job commits a PostgreSQL transaction (baseP, qg8p).
    pub fn is_postgres(self) -> bool {
        match self {
            Variant::Baseline(Baseline { store, .. })
            | Variant::Queuegen(Queuegen { store, .. }) => store == Store::Postgres,
            Variant::Trim | Variant::LuaRead => false,
        }
    }

    pub fn name(self) -> String {
        match self {
            Variant::Trim => "trim pass".to_owned(),
            Variant::LuaRead => "retry transition's entry read in Lua".to_owned(),
            Variant::Baseline(Baseline {
                shape: Some(shape), ..
            }) => format!(
                "baseline (redis-rs, 8 consumers, {}, decoded)",
                shape.describe()
            ),
            Variant::Baseline(base) => format!(
                "baseline ({}, {}{}{})",
                if base.store == Store::Postgres {
                    "redis-rs + tokio-postgres"
                } else {
                    "redis-rs"
                },
                if base.single {
                    "1 consumer"
                } else {
                    "8 consumers"
                },
                base.store.parts().1,
                if base.dedup {
                    " + dedup script per publish"
                } else {
                    ""
                }
            ),
            Variant::Queuegen(qg) => {
                let workers = match qg.workers {
                    1 => "1 worker".to_owned(),
                    n => format!("{n} workers"),
                };
                let telemetry = match (qg.telemetry, qg.tracing) {
                    (true, true) => " + metrics + tracing at info",
                    (true, false) => " + metrics",
                    (false, true) => " + tracing at info",
                    (false, false) => "",
                };
                let (store, feature) = (qg.store.parts().2, qg.feature.parts().1);
                format!("queuegen, {workers}{store}{telemetry}{feature}")
            }
        }
    }

    /// The variant a `--variant` value names.
    fn parse_slug(slug: &str) -> Result<Variant, String> {
        let known = Variant::ALL
            .into_iter()
            .chain([Variant::Trim, Variant::LuaRead]);
        known.clone().find(|v| v.slug() == slug).ok_or_else(|| {
            let known: Vec<String> = known.map(Variant::slug).collect();
            format!("unknown variant {slug:?}; known: {}", known.join(", "))
        })
    }

    pub fn slug(self) -> String {
        let flag = |on: bool, letter: &'static str| if on { letter } else { "" };
        match self {
            Variant::Trim => "trim".to_owned(),
            Variant::LuaRead => "lua".to_owned(),
            Variant::Baseline(base) => format!(
                "base{}{}{}{}",
                flag(base.single, "1"),
                base.store.parts().0,
                flag(base.dedup, "D"),
                base.shape.map_or("", Shape::letter)
            ),
            Variant::Queuegen(qg) => format!(
                "qg{}{}{}{}{}",
                qg.workers,
                qg.store.parts().0.to_lowercase(),
                flag(qg.telemetry, "m"),
                flag(qg.tracing, "t"),
                qg.feature.parts().0
            ),
        }
    }
}

/// What each job of one variant's round commits, and where.
#[derive(Clone, Copy)]
pub enum Sink<'a> {
    Nothing,
    Redis,
    /// The round's schema (`baseP`, `qg8p`).
    Postgres(&'a pg::PgRound),
}

/// `N jobs`, or with the PostgreSQL variants among others of another
/// count, `N jobs (baseP, qg8p: M)`.
pub fn jobs_text(args: &Args, variants: &[Variant]) -> String {
    let postgres = variants.iter().any(|v| v.is_postgres());
    let others = variants.iter().any(|v| !v.is_postgres());
    match (postgres, others) {
        (true, true) if args.pg_jobs != args.jobs => {
            format!("{} jobs (baseP, qg8p: {})", args.jobs, args.pg_jobs)
        }
        (true, false) => format!("{} jobs", args.pg_jobs),
        _ => format!("{} jobs", args.jobs),
    }
}

/// The variants the rounds run, in order: --variant's, else the default set.
fn chosen_variants(args: &Args) -> Vec<Variant> {
    Variant::ALL
        .into_iter()
        .filter(|variant| match (args.variants.is_empty(), args.rate) {
            (false, _) => args.variants.contains(variant),
            (true, Some(_)) => {
                Variant::STEADY.contains(variant) || (args.postgres && variant.is_postgres())
            }
            (true, None) => !variant.is_shape() && (args.postgres || !variant.is_postgres()),
        })
        .collect()
}

fn main() -> Result<()> {
    let mut args = Args::parse();
    if !args.outbox && args.rate.is_some() != args.seconds.is_some() {
        bail!("--rate and --seconds go together (steady-state mode)");
    }
    if !args.fleet.is_empty() && args.seconds.is_some() {
        bail!("--fleet does not run in steady-state mode (--rate, --seconds)");
    }
    args.jobs = args.jobs_given.unwrap_or(DEFAULT_JOBS);
    args.pg_jobs = args.jobs_given.unwrap_or(DEFAULT_PG_JOBS);
    if args.outbox {
        // The lag phase's rate and length.
        let rate = *args.rate.get_or_insert(2_000.0);
        let seconds = *args.seconds.get_or_insert(10.0);
        if !(rate > 0.0 && seconds > 0.0) || rate * seconds < 1.0 {
            bail!("--rate and --seconds must be above 0 (at least one row)");
        }
        if args.outbox_batch == 0 {
            bail!("--outbox-batch must be at least 1");
        }
    } else if let (Some(rate), Some(seconds)) = (args.rate, args.seconds) {
        if !(rate > 0.0 && seconds > 0.0) {
            bail!("--rate and --seconds must be above 0");
        }
        args.jobs = (rate * seconds).round().max(1.0) as u64;
        args.pg_jobs = args.jobs;
        if args.variants.contains(&Variant::Trim) || args.variants.contains(&Variant::LuaRead) {
            bail!("the trim and lua variants do not run in steady-state mode (--rate)");
        }
    }
    if args.jobs == 0 || args.pg_jobs == 0 || args.rounds == 0 || args.partitions == 0 {
        bail!("--jobs, --rounds and --partitions must be at least 1");
    }
    args.postgres |= args.postgres_url.is_some();
    if args.pg_pool == 0 {
        bail!("--pg-pool must be at least 1");
    }
    if args.fleet.contains(&0) || !args.idle.is_finite() || args.idle <= 0.0 {
        bail!("--fleet and --idle must be above 0");
    }
    if args.pipeline && (args.runs == 0 || args.fan_out == 0 || args.stage_workers == 0) {
        bail!("--runs, --fan-out and --stage-workers must be at least 1");
    }
    if args.batch == 0 || args.concurrency == 0 {
        bail!("--batch and --concurrency must be at least 1");
    }
    // Dropped at the end of main (or on an error): kills and reaps the servers.
    let private = match (&args.redis, args.cluster) {
        (Some(_), _) => None,
        (None, false) => Some(Private::Server(
            std::panic::catch_unwind(queuegen_tests::RedisServer::start)
                .map_err(|_| anyhow::anyhow!("could not start a private redis-server"))?,
        )),
        (None, true) => Some(Private::Cluster(
            std::panic::catch_unwind(queuegen_tests::RedisCluster::start)
                .map_err(|_| anyhow::anyhow!("could not start a private Redis Cluster"))?,
        )),
    };
    let url = match (&args.redis, &private) {
        (Some(url), _) => url.clone(),
        (None, Some(Private::Server(server))) => server.url(),
        (None, Some(Private::Cluster(cluster))) => cluster.url(),
        (None, None) => unreachable!("a server is started when no URL is given"),
    };
    let needs_postgres = args.outbox
        || (args.fleet.is_empty()
            && !args.pipeline
            && chosen_variants(&args).iter().any(|v| v.is_postgres()));
    // Dropped at the end of main (or on an error): stops the server and removes its directory.
    let private_pg = match (&args.postgres_url, needs_postgres) {
        (None, true) => Some(start_postgres(&args)?),
        _ => None,
    };
    if let Some(server) = &private_pg {
        usage::watch_postgres(server.pid());
    }
    let pg_url = match (&args.postgres_url, &private_pg) {
        (Some(url), _) => Some(url.clone()),
        (None, Some(server)) => Some(server.url()),
        (None, None) => None,
    };
    telemetry::install();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("building the tokio runtime")?;
    let result = runtime.block_on(run(&args, &url, pg_url.as_deref()));
    // Stop background tasks (and their connections) before the servers go away.
    runtime.shutdown_timeout(Duration::from_secs(5));
    result
}

/// A private PostgreSQL with production durability (`pg::DURABILITY`),
/// room for both sides' pools, and any --pg-setting.
fn start_postgres(args: &Args) -> Result<queuegen_tests::PostgresServer> {
    // Every pool of one variant (8 × --pg-pool), the last variant's still
    // closing, the outbox's enqueuers and publishers, and the bench's own.
    let max_connections = (2 * 8 * args.pg_pool + 100).max(200).to_string();
    let mut settings: Vec<(&str, &str)> = pg::DURABILITY.to_vec();
    settings.push(("max_connections", &max_connections));
    for (name, value) in &args.pg_settings {
        settings.push((name, value));
    }
    std::panic::catch_unwind(|| queuegen_tests::PostgresServer::start_with(&settings))
        .map_err(|_| anyhow::anyhow!("could not start a private PostgreSQL"))
}

/// The servers this run started (none with `--redis`).
enum Private {
    Server(queuegen_tests::RedisServer),
    Cluster(queuegen_tests::RedisCluster),
}

async fn run(args: &Args, url: &str, pg_url: Option<&str>) -> Result<()> {
    let redis = queuegen_runtime::Redis::connect(url)
        .await
        .with_context(|| format!("connecting to {url}"))?;
    let code = std::fs::read_to_string(queuegen_tests::library::tests_library_path())
        .context("reading the tests' Function library (tests/deploy/functions.lua)")?;
    queuegen_runtime::admin::load_library(&redis, &code)
        .await
        .context("loading the Function library")?;
    let redis_version = report::redis_version(&redis).await?;
    let primaries = redis.primaries().await?.len();
    let deployment = if redis.is_cluster() {
        format!("a Cluster of {primaries} primaries seeded")
    } else {
        "a server".to_owned()
    };
    let load = match (args.fleet.as_slice(), args.rate, args.seconds) {
        _ if args.pipeline => format!(
            "pipeline first -> middle (fan-out {}) -> join, {} runs, {} partitions per stage, \
             {} worker(s) per stage, {} rounds",
            args.fan_out, args.runs, args.partitions, args.stage_workers, args.rounds
        ),
        _ if args.outbox => format!(
            "outbox, {} rows dispatched, then {} rows/s for {} s, {} partitions, {} rounds",
            args.jobs,
            args.rate.unwrap_or_default(),
            args.seconds.unwrap_or_default(),
            args.partitions,
            args.rounds
        ),
        ([_, ..], _, _) => format!(
            "fleets of {:?} workers over 4 queues, idle {} s, then a burst of {} jobs",
            args.fleet, args.idle, args.jobs
        ),
        ([], Some(rate), Some(seconds)) => format!(
            "steady state, {rate} jobs/s for {seconds} s, {} jobs, {} partitions, {} rounds",
            args.jobs, args.partitions, args.rounds
        ),
        _ => format!(
            "backlog, {}, {} partitions, {} rounds",
            jobs_text(args, &chosen_variants(args)),
            args.partitions,
            args.rounds
        ),
    };
    eprintln!("queuegen-bench: redis {redis_version}, {deployment} at {url}; {load}");
    let mut pg_info = None;
    if let Some(pg_url) = pg_url {
        let source = match &args.postgres_url {
            Some(_) => "--postgres-url",
            None => "private, queuegen_tests::PostgresServer",
        };
        let info = pg::ServerInfo::query(pg_url, source.to_owned())
            .await
            .context("querying the PostgreSQL server")?;
        eprintln!("queuegen-bench: {}", info.line());
        pg_info = Some(info);
    }

    if args.outbox {
        let (pg_url, pg_info) = pg_url.zip(pg_info.as_ref()).context("no PostgreSQL")?;
        let results = outbox::run(args, url, &redis, pg_url).await?;
        let table = outbox::markdown(args, pg_info, &results);
        let json = outbox::json(args, pg_info, &results);
        return report::finish(args, redis.is_cluster(), &redis_version, &table, json);
    }

    if !args.fleet.is_empty() {
        let mut results = Vec::with_capacity(args.fleet.len());
        for &workers in &args.fleet {
            let prefix = format!("qgbench{}fleet{workers}", std::process::id());
            let outcome = fleet::run(args, url, &prefix, workers).await;
            let cleaned = report::delete_prefix(&redis, &prefix).await;
            let result = outcome.with_context(|| format!("the fleet run of {workers} workers"))?;
            cleaned.with_context(|| format!("deleting the keys of {prefix}"))?;
            eprintln!(
                "queuegen-bench: {workers} workers: {:.0} idle commands/s, {:.0} of them blocking reads",
                result.idle_commands_per_sec(),
                result.idle_blocking_reads_per_sec()
            );
            results.push(result);
        }
        let table = fleet::markdown(&results, redis.is_cluster());
        let json = fleet::json(args, &results);
        return report::finish(args, redis.is_cluster(), &redis_version, &table, json);
    }

    if args.pipeline {
        if redis.is_cluster() {
            bail!("--pipeline runs on one server only");
        }
        let results = pipeline::run(args, url, &redis).await?;
        let table = pipeline::markdown(args, &results);
        let json = pipeline::json(args, &results);
        return report::finish(args, false, &redis_version, &table, json);
    }

    if args.variants.contains(&Variant::Trim) {
        let prefix = format!("qgbench{}trim", std::process::id());
        let costs = trim::run(&redis, &prefix, &args.trim_entries).await?;
        println!("{}", trim::markdown(&costs));
    }
    if args.variants.contains(&Variant::LuaRead) {
        let prefix = format!("qgbench{}lua", std::process::id());
        let outcome = shape_lua::run(url, &prefix, args.jobs).await;
        report::delete_prefix(&redis, &prefix)
            .await
            .with_context(|| format!("deleting the keys of {prefix}"))?;
        println!("{}", shape_lua::markdown(&outcome?, args.jobs));
    }
    let outside_rounds = |v: &Variant| matches!(v, Variant::Trim | Variant::LuaRead);
    if !args.variants.is_empty() && args.variants.iter().all(outside_rounds) {
        println!("{}", report::machine_line(&redis_version));
        return Ok(());
    }

    // baseP and qg8p run --jobs (default DEFAULT_PG_JOBS) jobs.
    let pg_args = Args {
        jobs: args.pg_jobs,
        ..args.clone()
    };
    let mut rounds: Vec<Vec<(Variant, RoundResult)>> = Vec::new();
    for round in 0..args.rounds {
        let mut results = Vec::new();
        for variant in chosen_variants(args) {
            let prefix = format!("qgbench{}r{round}{}", std::process::id(), variant.slug());
            let (args, pg_round) = if variant.is_postgres() {
                let pg_url = pg_url.context("no PostgreSQL")?;
                let schema = pg::schema_name(round, &variant.slug());
                let pg_round = pg::PgRound::create(pg_url, &schema)
                    .await
                    .with_context(|| format!("creating schema {schema}"))?;
                (&pg_args, Some(pg_round))
            } else {
                (args, None)
            };
            let sink = |store| match (store, &pg_round) {
                (Store::Nothing, _) => Sink::Nothing,
                (Store::Redis, _) => Sink::Redis,
                (Store::Postgres, Some(pg_round)) => Sink::Postgres(pg_round),
                (Store::Postgres, None) => unreachable!("a PostgreSQL variant has its schema"),
            };
            let outcome = match variant {
                Variant::Baseline(base) if base.dedup && redis.is_cluster() => Err(
                    anyhow::anyhow!("baseD runs on one server only (its script names two keys)"),
                ),
                Variant::Baseline(base) if base.shape.is_some() && redis.is_cluster() => Err(
                    anyhow::anyhow!("the entry-shape baselines run on one server only"),
                ),
                Variant::Baseline(base) if redis.is_cluster() => {
                    let sink = sink(base.store);
                    cluster_baseline::run(args, url, &redis, &prefix, base.single, sink).await
                }
                Variant::Baseline(base) => {
                    baseline::run(args, url, &prefix, base, sink(base.store)).await
                }
                Variant::Queuegen(qg) => {
                    let _tracing = qg.tracing.then(telemetry::TracingOn::start);
                    queuegen::run(args, url, &prefix, qg, sink(qg.store)).await
                }
                Variant::Trim | Variant::LuaRead => {
                    unreachable!("the trim and lua variants are not part of the rounds")
                }
            };
            // Clean up even after a failed variant, then report the failure.
            let cleaned = report::delete_prefix(&redis, &prefix).await;
            // Every job left exactly one documents row and one marker.
            let (checked, dropped) = match &pg_round {
                Some(pg_round) => (
                    pg_round.check(args.jobs).await,
                    pg_round.drop_schema().await,
                ),
                None => (Ok(()), Ok(())),
            };
            let result = outcome.with_context(|| format!("round {round}, {}", variant.name()))?;
            cleaned.with_context(|| format!("deleting the keys of {prefix}"))?;
            checked.with_context(|| format!("round {round}, {}", variant.name()))?;
            dropped?;
            match &result.steady {
                Some(histogram) => eprintln!(
                    "round {round}: {:<44} sent {:>9.0}/s  p50 {:>8.2} ms  p99 {:>8.2} ms  p99.9 {:>8.2} ms",
                    variant.name(),
                    result.enqueue_rate(),
                    histogram.value_at_quantile(0.5) as f64 / 1000.0,
                    histogram.value_at_quantile(0.99) as f64 / 1000.0,
                    histogram.value_at_quantile(0.999) as f64 / 1000.0,
                ),
                None => eprintln!(
                    "round {round}: {:<44} enqueue {:>9.0}/s  process {:>9.0}/s  end-to-end {:>9.0}/s",
                    variant.name(),
                    result.enqueue_rate(),
                    result.process_rate(),
                    result.end_to_end_rate()
                ),
            }
            results.push((variant, result));
        }
        rounds.push(results);
    }

    let mut table = match args.rate {
        Some(_) => report::steady_markdown(args, redis.is_cluster(), &rounds),
        None => report::markdown(args, redis.is_cluster(), &rounds),
    };
    if let Some(info) = &pg_info {
        table.push_str(&report::postgres_note(args, info, &rounds));
    }
    let json = report::json(args, redis.is_cluster(), pg_info.as_ref(), &rounds);
    report::finish(args, redis.is_cluster(), &redis_version, &table, json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_keeps_its_slug_name_and_baseline() {
        let expected = [
            ("base", "baseline (redis-rs, 8 consumers)", None),
            ("qg8", "queuegen, 8 workers", Some("base")),
            (
                "qg8f",
                "queuegen, 8 workers + entries as fields",
                Some("base"),
            ),
            ("qg8x", "queuegen, 8 workers + delete on ack", Some("base")),
            (
                "qg8l",
                "queuegen, 8 workers + rate limit (never reached)",
                Some("base"),
            ),
            (
                "baseD",
                "baseline (redis-rs, 8 consumers + dedup script per publish)",
                None,
            ),
            (
                "qg8d",
                "queuegen, 8 workers + dedup (publish_once)",
                Some("baseD"),
            ),
            ("qg8n", "queuegen, 8 workers + two lanes", Some("base")),
            ("qg8m", "queuegen, 8 workers + metrics", Some("base")),
            (
                "qg8mt",
                "queuegen, 8 workers + metrics + tracing at info",
                Some("base"),
            ),
            ("base1", "baseline (redis-rs, 1 consumer)", None),
            ("qg1", "queuegen, 1 worker", Some("base1")),
            (
                "baseR",
                "baseline (redis-rs, 8 consumers + result SET)",
                None,
            ),
            ("qg8r", "queuegen, 8 workers + result store", Some("baseR")),
            (
                "baseP",
                "baseline (redis-rs + tokio-postgres, 8 consumers + documents row and marker, \
                 one transaction per job)",
                None,
            ),
            (
                "qg8p",
                "queuegen, 8 workers + PgResults (documents row and marker)",
                Some("baseP"),
            ),
            (
                "baseF",
                "baseline (redis-rs, 8 consumers, every field a stream field, decoded)",
                Some("base"),
            ),
            (
                "baseB",
                "baseline (redis-rs, 8 consumers, Lua-read header fields + body as one JSON \
                 field, decoded)",
                Some("baseF"),
            ),
            (
                "baseM",
                "baseline (redis-rs, 8 consumers, Lua-read header fields + body as one \
                 MessagePack field, decoded)",
                Some("baseF"),
            ),
            (
                "baseK",
                "baseline (redis-rs, 8 consumers, one MessagePack field, decoded)",
                Some("baseF"),
            ),
            (
                "baseJ",
                "baseline (redis-rs, 8 consumers, one JSON field, decoded)",
                Some("baseF"),
            ),
        ];
        let actual: Vec<(String, String, Option<String>)> = Variant::ALL
            .iter()
            .map(|v| (v.slug(), v.name(), v.reference().map(Variant::slug)))
            .collect();
        let expected: Vec<(String, String, Option<String>)> = expected
            .iter()
            .map(|(slug, name, base)| (slug.to_string(), name.to_string(), base.map(str::to_owned)))
            .collect();
        assert_eq!(actual, expected);
        assert_eq!(Variant::parse_slug("trim"), Ok(Variant::Trim));
        assert_eq!(Variant::parse_slug("lua"), Ok(Variant::LuaRead));
        assert_eq!(Variant::parse_slug("qg8mt"), Ok(Variant::ALL[9]));
        assert!(Variant::STEADY.iter().all(|v| Variant::ALL.contains(v)));
    }
}
