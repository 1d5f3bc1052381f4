//! Every scenario of the suite, each a function of the target it runs on.
//!
//! A scenario deploys its own servers through the target, induces its
//! failure for real (kill -9, SIGSTOP, SIGTERM, an outsider's XDEL, a
//! server setting) and returns a [`Verdict`]. It reaches the servers only
//! through the target's deployment, so a new target (a primary with a
//! replica, a Cluster) runs it unchanged. Which targets each runs on is
//! chosen here, in [`all`].

mod crash;
mod functions;
mod pause;
mod pipeline;
mod poison;
mod recovery;
mod restart;
mod shutdown;
mod stalled;
mod start;
mod topology;
mod transitions;
mod trim;

use std::future::Future;
use std::pin::Pin;

use queuegen_tests::suite::Target;
use queuegen_tests::support::LogCapture;

use crate::verdict::Verdict;

/// How big a run is.
#[derive(Debug, Clone, Copy)]
pub struct Size {
    /// The long form: more jobs (and, in the runner, more runs).
    pub long: bool,
}

impl Size {
    /// `short` jobs, or five times as many in the long form.
    pub fn jobs(self, short: usize) -> usize {
        if self.long {
            short * 5
        } else {
            short
        }
    }
}

/// What a scenario is given: where it runs, how big, and its log lines.
pub struct Run {
    pub target: Target,
    pub size: Size,
    /// Everything logged at `info` and above on the scenario's thread (its
    /// in-process workers included) while it runs.
    pub logs: LogCapture,
}

pub type Running = Pin<Box<dyn Future<Output = Verdict>>>;

/// One scenario of the suite.
pub struct Scenario {
    /// The targets it runs on (the table shows them in [`Target::all`]'s order).
    pub targets: &'static [Target],
    /// What filters match: short, unique.
    pub id: &'static str,
    /// Its row in issue 11's "Must show" list, if it is one.
    pub row: Option<u8>,
    pub title: &'static str,
    pub run: fn(Run) -> Running,
}

/// Where a row runs unless it says otherwise: a server with each login, and
/// the Cluster. Not the pair: without a promotion it is a server behind a
/// forwarder, and the replica takes no part in what a worker meets (row 2's
/// redelivery, row 9's restart from the AOF would show nothing new there).
const GENERIC: &[Target] = &[Target::STANDALONE, Target::STANDALONE_ACL, Target::CLUSTER];
/// [`GENERIC`] and the Cluster with the worker ACL user, for the rows where
/// a Cluster asks the worker user for more than a server does: the slot map
/// (`CLUSTER SLOTS`) when connecting and after a change, `ASKING` and `WAIT`
/// (10, 12), the ACL user on a promoted replica (10), the start checks on
/// every primary (13, 16), a multi-key Function refused (14). Rows 1 and 8
/// stand for the working rows (intake, claims, acks, retry transitions):
/// the others send the same commands along the same routes. Every row
/// passed on `cluster+acl` when tried, but running them all there adds
/// about 50 s to the short form; these add about 15 s.
const WITH_CLUSTER_LOGIN: &[Target] = &[
    Target::STANDALONE,
    Target::STANDALONE_ACL,
    Target::CLUSTER,
    Target::CLUSTER_ACL,
];
/// Restarting every node of a Cluster, or a pair's primary, is a failover
/// question (row 10).
const STANDALONE: &[Target] = &[Target::STANDALONE, Target::STANDALONE_ACL];
/// A replica takes over a primary: on the pair by promotion, on the Cluster
/// by `CLUSTER FAILOVER`.
const WITH_REPLICAS: &[Target] = &[Target::PAIR, Target::CLUSTER, Target::CLUSTER_ACL];
const CLUSTER: &[Target] = &[Target::CLUSTER, Target::CLUSTER_ACL];
/// The pipeline rows: a server, and a Cluster where the stages' partitions
/// are in different slots (each a queue of its own), so every hand-off
/// crosses slots. The ACL targets need the worker role's run keys, which
/// the deploy_acl test proves on the generated user.
const PIPELINE: &[Target] = &[Target::STANDALONE, Target::CLUSTER];

/// The suite, in table order.
pub fn all() -> Vec<Scenario> {
    vec![
        Scenario {
            targets: WITH_CLUSTER_LOGIN,
            id: "kill-after-read",
            row: Some(1),
            title: "kill -9 after read, before any effect",
            run: |run| Box::pin(crash::killed_before_effect(run)),
        },
        Scenario {
            targets: GENERIC,
            id: "kill-after-effect",
            row: Some(2),
            title: "kill -9 after the durable result, before XACK",
            run: |run| Box::pin(crash::killed_after_effect(run)),
        },
        Scenario {
            targets: GENERIC,
            id: "stopped-past-min-idle",
            row: Some(3),
            title: "worker SIGSTOPped past claim.min_idle, then SIGCONT",
            run: |run| Box::pin(stalled::stopped_past_min_idle(run)),
        },
        Scenario {
            targets: GENERIC,
            id: "recovery-race",
            row: Some(4),
            title: "two recovery loops racing",
            run: |run| Box::pin(recovery::two_loops_racing(run)),
        },
        Scenario {
            targets: GENERIC,
            id: "poison-crash-loop",
            row: Some(5),
            title: "poison crash loop (kill -9 on every delivery)",
            run: |run| Box::pin(poison::crash_loop(run)),
        },
        Scenario {
            targets: GENERIC,
            id: "pending-deleted",
            row: Some(6),
            title: "pending entries deleted and trimmed by an outsider",
            run: |run| Box::pin(recovery::pending_entries_deleted(run)),
        },
        Scenario {
            targets: GENERIC,
            id: "trim-under-lag",
            row: Some(7),
            title: "trim under lag with three groups",
            run: |run| Box::pin(trim::under_lag(run)),
        },
        Scenario {
            targets: WITH_CLUSTER_LOGIN,
            id: "scheduler-kill",
            row: Some(8),
            title: "kill -9 of the scheduler mid-batch",
            run: |run| Box::pin(transitions::scheduler_killed_mid_batch(run)),
        },
        Scenario {
            targets: WITH_CLUSTER_LOGIN,
            id: "delayed-kill",
            row: None,
            title: "kill -9 of the scheduler mid-batch of delayed jobs",
            run: |run| Box::pin(transitions::delayed_promoter_killed_mid_batch(run)),
        },
        Scenario {
            targets: GENERIC,
            id: "kill-before-retry-schedule",
            row: None,
            title: "kill -9 before the retry_schedule call",
            run: |run| Box::pin(transitions::killed_at(run, "before_retry_schedule")),
        },
        Scenario {
            targets: GENERIC,
            id: "kill-after-retry-schedule",
            row: None,
            title: "kill -9 after the retry_schedule call",
            run: |run| Box::pin(transitions::killed_at(run, "after_retry_schedule")),
        },
        Scenario {
            targets: GENERIC,
            id: "kill-before-dead-letter",
            row: None,
            title: "kill -9 before the dead_letter call",
            run: |run| Box::pin(transitions::killed_at(run, "before_dead_letter")),
        },
        Scenario {
            targets: GENERIC,
            id: "kill-after-dead-letter",
            row: None,
            title: "kill -9 after the dead_letter call",
            run: |run| Box::pin(transitions::killed_at(run, "after_dead_letter")),
        },
        Scenario {
            targets: STANDALONE,
            id: "aof-always-restart",
            row: Some(9),
            title: "redis-server kill -9 + AOF restart (appendfsync always)",
            run: |run| Box::pin(restart::aof_restart(run, "always")),
        },
        Scenario {
            targets: STANDALONE,
            id: "aof-everysec-restart",
            row: Some(9),
            title: "redis-server kill -9 + AOF restart (appendfsync everysec)",
            run: |run| Box::pin(restart::aof_restart(run, "everysec")),
        },
        Scenario {
            targets: WITH_REPLICAS,
            id: "primary-failover",
            row: Some(10),
            title: "primary failover while publishing (WAIT 1) and acking",
            run: |run| Box::pin(topology::changed_mid_work(run, topology::Change::Failover)),
        },
        Scenario {
            targets: GENERIC,
            id: "redis-paused",
            row: Some(11),
            title: "redis-server SIGSTOPped past the client timeouts",
            run: |run| Box::pin(pause::server_paused(run)),
        },
        Scenario {
            targets: CLUSTER,
            id: "cluster-reshard",
            row: Some(12),
            title: "live resharding of two partitions' slots mid-work",
            run: |run| Box::pin(topology::changed_mid_work(run, topology::Change::Reshard)),
        },
        Scenario {
            targets: WITH_CLUSTER_LOGIN,
            id: "library-missing",
            row: Some(13),
            title: "a server without the library version",
            run: |run| Box::pin(start::library_missing(run)),
        },
        Scenario {
            targets: WITH_CLUSTER_LOGIN,
            id: "cross-partition-function",
            row: Some(14),
            title: "a Function call with keys of two partitions",
            run: |run| Box::pin(functions::two_partitions_refused(run)),
        },
        Scenario {
            targets: WITH_CLUSTER_LOGIN,
            id: "eviction-policy",
            row: Some(16),
            title: "maxmemory-policy other than noeviction",
            run: |run| Box::pin(start::eviction_policy_refused(run)),
        },
        Scenario {
            targets: GENERIC,
            id: "sigterm-mid-batch",
            row: Some(17),
            title: "SIGTERM mid-batch",
            run: |run| Box::pin(shutdown::sigterm_mid_batch(run)),
        },
        Scenario {
            targets: PIPELINE,
            id: "pipeline-kill-after-handoff",
            row: None,
            title: "pipeline: kill -9 after the children are published, before the parent's ack",
            run: |run| {
                Box::pin(pipeline::killed_at(
                    run,
                    "after_handoff_published",
                    &["split"],
                    &[],
                ))
            },
        },
        Scenario {
            targets: PIPELINE,
            id: "pipeline-kill-after-settle",
            row: None,
            title: "pipeline: kill -9 after a child's completion is recorded, before its ack",
            run: |run| {
                Box::pin(pipeline::killed_at(
                    run,
                    "after_run_settled",
                    &["page", "cover"],
                    &["split"],
                ))
            },
        },
        Scenario {
            targets: PIPELINE,
            id: "pipeline-kill-after-join",
            row: None,
            title: "pipeline: kill -9 after the last completion published the join, before its ack",
            run: |run| {
                Box::pin(pipeline::killed_at(
                    run,
                    "after_join_published",
                    &["page", "cover"],
                    &["split"],
                ))
            },
        },
    ]
}
