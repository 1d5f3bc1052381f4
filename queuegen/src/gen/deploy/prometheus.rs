//! `prometheus/rules.yml`: alerting rules for the spec's queues, on the metrics workers, producers and `queuegen monitor` export.
//!
//! The rules are built once as [`Alert`]s; the runbook renders its sections
//! from the same list, so every `runbook_url` anchor has its heading. Metric
//! names and label sets are those of docs/operations/observability.md
//! ("Metrics") and docs/operations/views.md ("`queuegen monitor`"). Every expression aggregates to bounded labels
//! (`queue`, `partition`, `group`, and closed sets like `outcome`), which
//! also folds the copies a second monitor or several workers export.

use std::time::Duration;

use minijinja::context;
use serde::Serialize;

use super::{k8s, quoted, runbook};
use crate::error::Result;
use crate::gen::templates::render;
use crate::gen::{functions, header_in, CommentSyntax, GeneratedFile};
use crate::spec::limits::RetentionFloor;
use crate::spec::model::{Pipeline, Queue, Spec, TrimMode};
use crate::spec::units::format_duration;

/// The file the rules are written to, relative to the deploy directory.
pub const FILE_NAME: &str = "prometheus/rules.yml";

/// Every alert the generator knows; which ones a queue gets depends on its spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertKind {
    /// `alerts.oldest_pending_age`.
    OldestPendingAge,
    /// `alerts.oldest_ready_age`.
    OldestReadyAge,
    /// `alerts.dead_letters`.
    DeadLetters,
    /// Retry, dead-letter or promote calls keep failing.
    RecoveryFailing,
    /// No worker holds a partition's loops lease, so nobody recovers it.
    NoRecoveryLeader,
    /// Pending entries were deleted from the stream: their jobs are lost.
    PendingDeleted,
    /// Producers refuse publishes (only queues with an admission limit).
    BackpressureActive,
    /// Trimming a stream keeps aborting, so it grows.
    TrimAborted,
    /// The service's Function library is not on the server.
    LibraryMissing,
    /// A pipeline's run has waited at this join longer than its stages can
    /// take (only join queues).
    JoinWaiting,
}

impl AlertKind {
    /// The Prometheus alert name. The same for every queue: the `queue`
    /// label tells them apart, so one Alertmanager route covers all.
    pub fn alert_name(self) -> &'static str {
        self.names().0
    }

    /// The runbook heading's words (after `<queue>: ` for a queue's alert).
    pub fn title(self) -> &'static str {
        self.names().1
    }

    /// (alert name, title).
    fn names(self) -> (&'static str, &'static str) {
        match self {
            AlertKind::OldestPendingAge => ("QueuegenOldestPendingAge", "oldest pending age"),
            AlertKind::OldestReadyAge => ("QueuegenOldestReadyAge", "oldest ready age"),
            AlertKind::DeadLetters => ("QueuegenDeadLetters", "dead letters"),
            AlertKind::RecoveryFailing => ("QueuegenRecoveryFailing", "recovery failing"),
            AlertKind::NoRecoveryLeader => ("QueuegenNoRecoveryLeader", "no recovery leader"),
            AlertKind::PendingDeleted => ("QueuegenPendingDeleted", "pending entries deleted"),
            AlertKind::BackpressureActive => ("QueuegenBackpressureActive", "backpressure active"),
            AlertKind::TrimAborted => ("QueuegenTrimAborted", "trim aborted"),
            AlertKind::LibraryMissing => {
                ("QueuegenFunctionLibraryMissing", "function library missing")
            }
            AlertKind::JoinWaiting => ("QueuegenJoinWaiting", "join waiting too long"),
        }
    }
}

/// How urgently a person is needed: the `severity` label Alertmanager routes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Jobs are late past the spec's limit, lost, or cannot settle: page.
    Critical,
    /// Something degrades and will need a person soon: a ticket.
    Warning,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Critical => "critical",
            Severity::Warning => "warning",
        }
    }
}

/// One alerting rule, with what the runbook says about it.
#[derive(Debug, Clone, Serialize)]
pub struct Alert {
    pub kind: AlertKind,
    /// The Prometheus alert name.
    pub name: &'static str,
    /// The queue it watches; `None` for the service's alerts.
    pub queue: Option<String>,
    pub expr: String,
    /// How long `expr` must hold before the alert fires (Prometheus
    /// duration text); `None` when it fires at once.
    pub for_duration: Option<String>,
    pub severity: Severity,
    /// Labels besides `severity`, in order: `service`, the `queue` (which
    /// also keeps each queue's rule distinct, as `promtool` wants), and for
    /// dead letters the owner.
    pub labels: Vec<(String, String)>,
    pub summary: String,
    pub description: String,
    /// The runbook section's heading text.
    pub heading: String,
    /// Its GitHub-style anchor: the heading lowercased, `: ` dropped,
    /// spaces as `-`. Queue and service names are `[a-z][a-z0-9_-]*`, which
    /// an anchor keeps as they are.
    pub anchor: String,
    /// `RUNBOOK.md#<anchor>`, relative to the deploy directory.
    pub runbook_url: String,
    /// The spec setting the alert's threshold comes from, when it has one.
    pub threshold: Option<String>,
    /// The pipeline a join's alert is about.
    pub pipeline: Option<String>,
}

/// The alerts of one rule group: one queue's, or the service's.
#[derive(Debug, Clone, Serialize)]
pub struct AlertGroup {
    pub name: String,
    pub queue: Option<String>,
    pub alerts: Vec<Alert>,
}

/// `prometheus/rules.yml` for `spec`.
pub fn generate(spec: &Spec, spec_file: &str) -> Result<GeneratedFile> {
    let groups: Vec<RuleGroup> = alert_groups(spec).iter().map(RuleGroup::from).collect();
    let contents = render(
        "rules.yml",
        context! {
            header => header_in(CommentSyntax::Hash, spec_file),
            service => &spec.service,
            runbook => runbook::FILE_NAME,
            groups,
        },
    )?;
    Ok(GeneratedFile::new(FILE_NAME, contents))
}

/// Every alert of `spec`: one group per queue in file order, then the service's.
pub fn alert_groups(spec: &Spec) -> Vec<AlertGroup> {
    let mut groups: Vec<AlertGroup> = spec
        .queues
        .iter()
        .map(|queue| AlertGroup {
            name: format!("queuegen-{}-{}", spec.service, queue.name),
            queue: Some(queue.name.clone()),
            alerts: queue_alerts(spec, queue),
        })
        .collect();
    groups.push(AlertGroup {
        name: format!("queuegen-{}", spec.service),
        queue: None,
        alerts: vec![library_missing(spec)],
    });
    groups
}

/// The spec's alerts of `queue`, then the ones every queue gets.
fn queue_alerts(spec: &Spec, queue: &Queue) -> Vec<Alert> {
    let rule = |kind| RuleOf {
        service: &spec.service,
        queue: Some(&queue.name),
        kind,
    };
    let selector = format!("{{queue=\"{}\"}}", queue.name);
    let mut alerts = Vec::new();

    if let Some((pipeline, bound, chain)) = join_wait_bound(spec, &queue.name) {
        let limit = format_duration(bound);
        alerts.push(rule(AlertKind::JoinWaiting).build(
            format!(
                "max by (pipeline, join) (queuegen_pipeline_join_oldest_wait_seconds{{pipeline=\"{pipeline}\",join=\"{}\"}}) > {}",
                queue.name,
                seconds(bound)
            ),
            // The gauge is itself an age, refreshed by `queuegen monitor`.
            None,
            Severity::Warning,
            vec![("pipeline".to_owned(), pipeline.to_owned())],
            format!(
                "Pipeline {pipeline}: a run has waited at join {} for more than {limit}",
                queue.name
            ),
            format!(
                "The oldest run in flight at join {} has waited {{{{ $value | humanizeDuration }}}} since its first stage opened it. The longest chain of stages before the join ({chain}) ends every job within {limit} (each stage's retries, handler timeouts, and claim and poison windows), so a job of the run ended without settling (quarantined as poison, or deleted while pending), or no worker runs one of the stages.",
                queue.name
            ),
            Some(format!(
                "the retry, handler.timeout, claim and poison settings of {chain}"
            )),
        ));
        if let Some(alert) = alerts.last_mut() {
            alert.pipeline = Some(pipeline.to_owned());
        }
    }

    if let Some(threshold) = queue.alerts.oldest_pending_age {
        let limit = format_duration(threshold);
        alerts.push(rule(AlertKind::OldestPendingAge).build(
            format!(
                "max by (queue, partition, group) (queuegen_queue_oldest_pending_age_seconds{selector}) > {}",
                seconds(threshold)
            ),
            // The gauge is itself an age: waiting longer would only add to the spec's limit.
            None,
            Severity::Critical,
            Vec::new(),
            format!(
                "Queue {{{{ $labels.queue }}}} partition {{{{ $labels.partition }}}}: an entry of group {{{{ $labels.group }}}} has been pending for more than {limit}"
            ),
            format!(
                "The oldest entry delivered to group {{{{ $labels.group }}}} and not yet acknowledged was added {{{{ $value | humanizeDuration }}}} ago (alerts.oldest_pending_age: {limit}). A handler is stuck or crash-looping on its job, or the worker holding it died and recovery claims it only once it is idle for claim.min_idle ({}).",
                format_duration(queue.claim.min_idle)
            ),
            Some(format!("alerts.oldest_pending_age: {limit}")),
        ));
    }

    if let Some(threshold) = queue.alerts.oldest_ready_age {
        let limit = format_duration(threshold);
        let admission = match queue.admission.max_oldest_ready_age {
            Some(admit) => format!(
                " Producers refuse new jobs for the partition once the age passes admission.max_oldest_ready_age ({}).",
                format_duration(admit)
            ),
            None => String::new(),
        };
        alerts.push(rule(AlertKind::OldestReadyAge).build(
            format!(
                "max by (queue, partition, group) (queuegen_queue_oldest_ready_age_seconds{selector}) > {}",
                seconds(threshold)
            ),
            None,
            Severity::Critical,
            Vec::new(),
            format!(
                "Queue {{{{ $labels.queue }}}} partition {{{{ $labels.partition }}}}: group {{{{ $labels.group }}}} is more than {limit} behind"
            ),
            format!(
                "The oldest entry not yet delivered to group {{{{ $labels.group }}}} was added {{{{ $value | humanizeDuration }}}} ago (alerts.oldest_ready_age: {limit}). Its workers are not keeping up, stopped, or not reading this partition.{admission}"
            ),
            Some(format!("alerts.oldest_ready_age: {limit}")),
        ));
    }

    if let Some(threshold) = queue.alerts.dead_letters {
        let owner = queue
            .dead_letter
            .owner
            .iter()
            .map(|owner| ("owner".to_owned(), owner.clone()))
            .collect();
        alerts.push(rule(AlertKind::DeadLetters).build(
            format!("max by (queue, partition) (queuegen_queue_dead_letters{selector}) >= {threshold}"),
            // A dead letter stays until replayed or trimmed: no flapping to wait out.
            None,
            Severity::Warning,
            owner,
            "Queue {{ $labels.queue }} partition {{ $labels.partition }}: {{ $value }} dead letters".to_owned(),
            format!(
                "The partition's dead-letter stream holds {{{{ $value }}}} entries (alerts.dead_letters: {threshold}). Jobs failed permanently, used up their {} attempts, were quarantined as poison after {} deliveries, or did not decode. Dead letters are kept {}.",
                queue.retry.max_attempts,
                queue.poison.max_deliveries,
                format_duration(queue.dead_letter.retention)
            ),
            Some(format!("alerts.dead_letters: {threshold}")),
        ));
    }

    // A failed call is retried next period; only failures that go on for
    // minutes need a person.
    alerts.push(rule(AlertKind::RecoveryFailing).build(
        format!(
            "sum by (queue, partition, group, outcome) (increase(queuegen_transition_failures_total{selector}[5m])) > 0"
        ),
        Some(format_duration(Duration::from_secs(600))),
        Severity::Warning,
        Vec::new(),
        "Queue {{ $labels.queue }} partition {{ $labels.partition }}: {{ $labels.outcome }} calls of group {{ $labels.group }} keep failing".to_owned(),
        "Workers of group {{ $labels.group }} have failed to {{ $labels.outcome }} entries for 10 minutes (queuegen_transition_failures_total; retry: schedule a retry, dead_letter: dead-letter or quarantine, promote: promote due retries). Each failure leaves the entry where it was, so jobs stay pending or their retries wait.".to_owned(),
        None,
    ));

    // Takeover after a crash takes up to 4 × claim.every (the lease period
    // plus a tick); one more minute covers the scrape and evaluation intervals.
    alerts.push(rule(AlertKind::NoRecoveryLeader).build(
        format!("max by (queue, partition, group) (queuegen_loops_leader{selector}) == 0"),
        Some(format_duration(queue.claim.every * 4 + Duration::from_secs(60))),
        Severity::Warning,
        Vec::new(),
        "Queue {{ $labels.queue }} partition {{ $labels.partition }}: no worker of group {{ $labels.group }} runs recovery".to_owned(),
        format!(
            "No worker of group {{{{ $labels.group }}}} holds the partition's loops lease, for longer than a takeover takes (4 × claim.every = {}): nobody claims its idle entries, quarantines poison or promotes its due retries.",
            format_duration(queue.claim.every * 4)
        ),
        None,
    ));

    // Every lost job counts: fire at the first one, and keep firing for the
    // window so that a person sees it.
    alerts.push(rule(AlertKind::PendingDeleted).build(
        format!(
            "sum by (queue, partition, group) (increase(queuegen_pending_deleted_total{selector}[15m])) > 0"
        ),
        None,
        Severity::Critical,
        Vec::new(),
        "Queue {{ $labels.queue }} partition {{ $labels.partition }}: pending jobs of group {{ $labels.group }} were deleted before being acknowledged".to_owned(),
        "In the last 15 minutes recovery found pending entries of group {{ $labels.group }} whose stream entry had been deleted (a trim or XDEL that did not respect the consumer groups): their jobs are lost. The workers' error log names their stream IDs.".to_owned(),
        None,
    ));

    // Only producers with an admission limit ever refuse; without one the
    // rule could not fire. It reads the monitor's gauge, the age admission
    // itself compares: producers run inside the team's own services, which
    // need not serve /metrics, so their refusal counter may be scraped nowhere.
    if let Some(admit) = queue.admission.max_oldest_ready_age {
        alerts.push(rule(AlertKind::BackpressureActive).build(
            format!(
                "max by (queue, partition) (queuegen_queue_oldest_ready_age_seconds{selector}) > {}",
                seconds(admit)
            ),
            // Short refusals are admission doing its job; sustained ones shed work.
            Some(format_duration(Duration::from_secs(300))),
            Severity::Warning,
            Vec::new(),
            "Queue {{ $labels.queue }} partition {{ $labels.partition }}: producers are refusing jobs (backpressure)".to_owned(),
            format!(
                "For 5 minutes the oldest undelivered entry of this partition has been older than admission.max_oldest_ready_age ({}), so producers refuse publishes to it. Callers get PublishError::Backpressure and must publish again later or shed the jobs; producers that serve /metrics count each refusal in queuegen_backpressure_refusals_total.",
                format_duration(admit)
            ),
            Some(format!("admission.max_oldest_ready_age: {}", format_duration(admit))),
        ));
    }

    // An abort is normal when a group changes mid-pass, and is retried next
    // pass; the alert is for a stream no pass has managed to trim for a
    // while. Holding the window's condition for one more window means no
    // pass succeeded for two windows (30m by default) while aborts went on.
    let window = Duration::from_secs(900).max(queue.retention.trim_every * 5);
    let stuck = format_duration(window * 2);
    if queue.retention.trim == TrimMode::CronJob {
        // `queuegen trim` in a CronJob exports no metrics: its runs are seen
        // through kube-state-metrics, and a run that aborts exits 1.
        alerts.push(trim_cronjob_stuck(
            spec,
            queue,
            rule(AlertKind::TrimAborted),
            window * 2,
        ));
        return alerts;
    }
    let window = format_duration(window);
    alerts.push(rule(AlertKind::TrimAborted).build(
        format!(
            "(sum by (queue, partition, stream) (increase(queuegen_trim_passes_total{{queue=\"{queue}\", outcome=\"aborted\"}}[{window}])) > 0) unless on (queue, partition, stream) (sum by (queue, partition, stream) (increase(queuegen_trim_passes_total{{queue=\"{queue}\", outcome=~\"trimmed|nothing_to_trim\"}}[{window}])) > 0)",
            queue = queue.name
        ),
        Some(window.clone()),
        Severity::Warning,
        Vec::new(),
        "Queue {{ $labels.queue }} partition {{ $labels.partition }}: trimming the {{ $labels.stream }} stream keeps aborting".to_owned(),
        format!(
            "No trim pass over the {{{{ $labels.stream }}}} stream has succeeded for {stuck}, and passes keep aborting and removing nothing: the consumer groups change between the trimmer's plan and its trim each time. Until a pass succeeds the stream keeps every entry and grows."
        ),
        None,
    ));

    alerts
}

/// The trim alert of a queue trimmed by `k8s/trim-cronjob.yaml`: no run has
/// succeeded for `stuck`, read from kube-state-metrics. A run exits 1 when a
/// stream's trim aborted or failed, so aborts keep the last success old.
fn trim_cronjob_stuck(spec: &Spec, queue: &Queue, rule: RuleOf<'_>, stuck: Duration) -> Alert {
    let cronjob = k8s::trim_cronjob_name(spec, queue);
    let namespace = &spec.kubernetes.namespace;
    let stuck_text = format_duration(stuck);
    rule.build(
        format!(
            "max by (namespace, cronjob) (time() - kube_cronjob_status_last_successful_time{{namespace=\"{namespace}\", cronjob=\"{cronjob}\"}}) > {}",
            seconds(stuck)
        ),
        // Runs are minutes apart: one reading is already the state.
        None,
        Severity::Warning,
        Vec::new(),
        format!(
            "Queue {}: no trim run of CronJob {cronjob} has succeeded for {stuck_text}",
            queue.name
        ),
        format!(
            "The CronJob {cronjob} trims every partition of the queue every {}, and no run has succeeded for {stuck_text}: runs exit 1 when a trim aborted (the consumer groups changed between plan and trim) or failed, or they do not run at all. Until one succeeds the streams keep every entry and grow. This rule reads kube-state-metrics (kube_cronjob_status_last_successful_time).",
            format_duration(queue.retention.trim_every)
        ),
        None,
    )
}

/// How long a job of `queue` can take to end, settled one way or another:
/// every attempt's handler timeout, the retries' delays, and the claim and
/// poison windows (the retention floor).
fn settle_bound(queue: &Queue) -> Duration {
    let attempts = queue
        .handler
        .timeout
        .saturating_mul(queue.retry.max_attempts);
    RetentionFloor::of(queue).total().saturating_add(attempts)
}

/// For a join queue: its pipeline, the longest time a run can wait there
/// while every job settles (the largest sum of [`settle_bound`] over a
/// chain of stages from the first to the join, the join excluded), and
/// that chain in words.
fn join_wait_bound<'s>(spec: &'s Spec, queue: &str) -> Option<(&'s str, Duration, String)> {
    let pipeline = spec.pipeline_of(queue)?;
    pipeline.stage(queue)?.join.as_ref()?;
    // The graph is acyclic (checked): the longest chain by depth-first walk.
    fn longest<'p>(
        spec: &Spec,
        pipeline: &'p Pipeline,
        at: &'p str,
        join: &str,
    ) -> Option<(Duration, Vec<&'p str>)> {
        if at == join {
            return Some((Duration::ZERO, Vec::new()));
        }
        let own = spec.queue(at).map_or(Duration::ZERO, settle_bound);
        pipeline
            .next_of(at)
            .filter_map(|next| longest(spec, pipeline, next, join))
            .max_by_key(|(bound, _)| *bound)
            .map(|(bound, mut chain)| {
                chain.insert(0, at);
                (bound.saturating_add(own), chain)
            })
    }
    let (bound, chain) = longest(spec, pipeline, &pipeline.first, queue)?;
    Some((&pipeline.name, bound, chain.join(" → ")))
}

/// The one alert about the whole service: its Function library version.
fn library_missing(spec: &Spec) -> Alert {
    let library = functions::library_name(&spec.service);
    let rule = RuleOf {
        service: &spec.service,
        queue: None,
        kind: AlertKind::LibraryMissing,
    };
    rule.build(
        format!("max by (library) (queuegen_function_library_loaded{{library=\"{library}\"}}) == 0"),
        // One reading can come from a server that `queuegen apply` has not
        // reached yet during a deploy.
        Some(format_duration(Duration::from_secs(60))),
        Severity::Critical,
        Vec::new(),
        "Function library {{ $labels.library }} is missing on Redis".to_owned(),
        format!(
            "queuegen monitor found no Function library {library} on the server (on a Cluster: on at least one primary). Acks, retries, dead letters, claims and trims of every {} queue call it, so they all fail and jobs stay pending.",
            spec.service
        ),
        None,
    )
}

/// What the rules of a queue, or the service's, share while one is built.
struct RuleOf<'a> {
    service: &'a str,
    /// `None` for the service's rules.
    queue: Option<&'a str>,
    kind: AlertKind,
}

impl RuleOf<'_> {
    #[allow(clippy::too_many_arguments)]
    fn build(
        self,
        expr: String,
        for_duration: Option<String>,
        severity: Severity,
        labels: Vec<(String, String)>,
        summary: String,
        description: String,
        threshold: Option<String>,
    ) -> Alert {
        let anchor = anchor_of(self.queue, self.kind);
        let mut all_labels = vec![("service".to_owned(), self.service.to_owned())];
        all_labels.extend(
            self.queue
                .map(|queue| ("queue".to_owned(), queue.to_owned())),
        );
        all_labels.extend(labels);
        Alert {
            kind: self.kind,
            name: self.kind.alert_name(),
            queue: self.queue.map(str::to_owned),
            expr,
            for_duration,
            severity,
            labels: all_labels,
            summary,
            description,
            heading: heading_of(self.queue, self.kind),
            runbook_url: runbook_url(&anchor),
            anchor,
            threshold,
            pipeline: None,
        }
    }
}

/// `<queue>: <title>`, or the title alone for the service's alerts.
fn heading_of(queue: Option<&str>, kind: AlertKind) -> String {
    match queue {
        Some(queue) => format!("{queue}: {}", kind.title()),
        None => kind.title().to_owned(),
    }
}

/// The GitHub anchor of [`heading_of`]: `: ` and spaces become one `-` each.
fn anchor_of(queue: Option<&str>, kind: AlertKind) -> String {
    let title = kind.title().replace(' ', "-");
    match queue {
        Some(queue) => format!("{queue}-{title}"),
        None => title,
    }
}

fn runbook_url(anchor: &str) -> String {
    format!("{}#{anchor}", runbook::FILE_NAME)
}

/// A duration as PromQL seconds: `600`, `0.25`.
fn seconds(duration: Duration) -> String {
    format!("{}", duration.as_secs_f64())
}

/// A group as YAML text: every string already a quoted YAML scalar.
#[derive(Serialize)]
struct RuleGroup {
    name: String,
    rules: Vec<Rule>,
}

#[derive(Serialize)]
struct Rule {
    alert: String,
    expr: String,
    for_duration: Option<String>,
    labels: Vec<(String, String)>,
    annotations: Vec<(String, String)>,
}

impl From<&AlertGroup> for RuleGroup {
    fn from(group: &AlertGroup) -> Self {
        RuleGroup {
            name: quoted(&group.name),
            rules: group.alerts.iter().map(Rule::from).collect(),
        }
    }
}

impl From<&Alert> for Rule {
    fn from(alert: &Alert) -> Self {
        let mut labels = vec![("severity".to_owned(), quoted(alert.severity.as_str()))];
        labels.extend(alert.labels.iter().map(|(k, v)| (k.clone(), quoted(v))));
        Rule {
            alert: quoted(alert.name),
            expr: quoted(&alert.expr),
            for_duration: alert.for_duration.clone(),
            labels,
            annotations: vec![
                ("summary".to_owned(), quoted(&alert.summary)),
                ("description".to_owned(), quoted(&alert.description)),
                ("runbook_url".to_owned(), quoted(&alert.runbook_url)),
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::spec;

    const SPEC: &str = "\
version: 1
service: billing
envelopes:
  Charge:
    schema: 1
    fields:
      account_ref: { type: string, max_bytes: 64 }
queues:
  charges:
    envelope: Charge
    partition_by: [job_id]
    claim: { every: 15s }
    admission: { max_oldest_ready_age: 2m }
    dead_letter: { owner: billing-oncall }
    alerts: { oldest_pending_age: 90s, oldest_ready_age: 250ms, dead_letters: 3 }
  refunds:
    envelope: Charge
    partition_by: [job_id]
";

    fn spec() -> Spec {
        let checked = spec::check_str(SPEC, "queues.yaml");
        checked
            .spec
            .unwrap_or_else(|| panic!("the test spec is valid: {:?}", checked.diagnostics))
    }

    fn alert<'a>(groups: &'a [AlertGroup], queue: &str, kind: AlertKind) -> Option<&'a Alert> {
        groups
            .iter()
            .flat_map(|g| &g.alerts)
            .find(|a| a.queue.as_deref() == Some(queue) && a.kind == kind)
    }

    #[test]
    fn spec_thresholds_become_filtered_expressions() {
        let groups = alert_groups(&spec());
        let pending = alert(&groups, "charges", AlertKind::OldestPendingAge).unwrap();
        assert_eq!(
            pending.expr,
            r#"max by (queue, partition, group) (queuegen_queue_oldest_pending_age_seconds{queue="charges"}) > 90"#
        );
        let ready = alert(&groups, "charges", AlertKind::OldestReadyAge).unwrap();
        assert!(ready.expr.ends_with(") > 0.25"), "{}", ready.expr);
        let dead = alert(&groups, "charges", AlertKind::DeadLetters).unwrap();
        assert!(
            dead.expr.ends_with(r#"{queue="charges"}) >= 3"#),
            "{}",
            dead.expr
        );
        let labels: Vec<(&str, &str)> = dead
            .labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            labels,
            [
                ("service", "billing"),
                ("queue", "charges"),
                ("owner", "billing-oncall")
            ]
        );
    }

    #[test]
    fn a_queue_without_alerts_or_admission_gets_only_the_always_on_rules() {
        let groups = alert_groups(&spec());
        let refunds = groups
            .iter()
            .find(|g| g.queue.as_deref() == Some("refunds"))
            .unwrap();
        let kinds: Vec<AlertKind> = refunds.alerts.iter().map(|a| a.kind).collect();
        assert_eq!(
            kinds,
            [
                AlertKind::RecoveryFailing,
                AlertKind::NoRecoveryLeader,
                AlertKind::PendingDeleted,
                AlertKind::TrimAborted
            ]
        );
        assert!(alert(&groups, "charges", AlertKind::BackpressureActive).is_some());
    }

    #[test]
    fn the_leader_alert_waits_for_a_takeover_and_a_scrape() {
        let groups = alert_groups(&spec());
        let leader = alert(&groups, "charges", AlertKind::NoRecoveryLeader).unwrap();
        assert_eq!(leader.for_duration.as_deref(), Some("2m"));
    }

    #[test]
    fn anchors_follow_the_headings() {
        let groups = alert_groups(&spec());
        let pending = alert(&groups, "charges", AlertKind::OldestPendingAge).unwrap();
        assert_eq!(pending.heading, "charges: oldest pending age");
        assert_eq!(pending.anchor, "charges-oldest-pending-age");
        assert_eq!(pending.runbook_url, "RUNBOOK.md#charges-oldest-pending-age");
        let library = &groups.last().unwrap().alerts[0];
        assert_eq!(library.anchor, "function-library-missing");
        assert!(
            library.expr.contains(r#"library="qg_billing_v"#),
            "{}",
            library.expr
        );
    }

    #[test]
    fn every_rule_carries_severity_and_the_three_annotations() {
        let file = generate(&spec(), "../queues.yaml").unwrap();
        assert_eq!(file.path, PathBuf::from(FILE_NAME));
        assert!(file.contents.starts_with("# Code generated by queuegen"));
        let rules = file.contents.matches("\n      - alert: ").count();
        let total: usize = alert_groups(&spec()).iter().map(|g| g.alerts.len()).sum();
        assert_eq!(rules, total);
        for key in ["severity: ", "summary: ", "description: ", "runbook_url: "] {
            assert_eq!(file.contents.matches(key).count(), total, "{key}");
        }
    }
}
