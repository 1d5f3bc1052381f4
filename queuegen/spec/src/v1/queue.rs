//! Queues: names, the envelope reference, partitioning, group, and every
//! policy section, with the checks that tie the sections together.

use std::time::Duration;

use crate::limits::{self, RetentionFloor, PARTITION_HEADER_FIELDS};
use crate::model::{
    Admission, Alerts, Backoff, Claim, DeadLetter, Dedup, EntryShape, Group, GroupStart,
    HandlerSettings, Jitter, Lane, OnAck, Payload, Poison, Queue, Rate, ResultStore, Retention,
    Retry, TenantRate, TrimMode,
};
use crate::suggest;
use crate::units::{self, format_duration, format_size, round_up_duration};
use crate::yaml::{Node, Pos};

use super::envelope::EnvelopeDef;
use super::format::{
    ADMISSION, ALERTS, BACKOFF, CLAIM, DEAD_LETTER, DEDUP, GROUP, HANDLER, LANE, PAYLOAD, POISON,
    QUEUE, RATE, RETENTION, RETRY, TENANT_RATE,
};
use super::kubernetes;
use super::names;
use super::postgres;
use super::read::{first_at, object, At, Ctx, Item, Object, Read};
use super::values;

/// Above these, a value is legal but almost certainly a mistake.
const MANY_PARTITIONS: u64 = 1024;
const MANY_CONCURRENT: u64 = 1024;
/// Most lanes of a queue: each is another stream per partition, read by
/// every worker of the queue.
const MAX_LANES: usize = 16;
/// `handler.tenant_rate.classes`: buckets tenants are hashed into, unless told.
const TENANT_CLASSES: u16 = 64;

/// `group.prune_consumers_after`'s default and its floor.
const DEFAULT_PRUNE_CONSUMERS_AFTER: Duration = secs(24 * 3600);
const MIN_PRUNE_CONSUMERS_AFTER: Duration = secs(60);

const fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// Reads one queue; the model only if every part of it is valid. `pool` is
/// the PostgreSQL pool when the spec uses PostgreSQL and its settings are valid.
pub(crate) fn queue(
    ctx: &mut Ctx<'_>,
    name: &str,
    item: &Item<'_>,
    envelopes: Option<&[EnvelopeDef]>,
    pool: Option<postgres::Pool>,
) -> Option<Queue> {
    let name_ok = names::check_lower_name(ctx, &item.key(), name, "queue");
    let q = object(ctx, item, &QUEUE);
    let envelope_name = q.read(ctx, "envelope", values::string);
    // With `envelopes` itself malformed, a missing name says nothing new.
    let envelope = match (&envelope_name, envelopes) {
        (Read::Ok(wanted), Some(envelopes)) => find_envelope(ctx, &q, wanted, envelopes),
        _ => None,
    };
    let partitions = q
        .count(
            ctx,
            "partitions",
            "use 1 to 16384 partitions (16384 is the number of Redis Cluster hash slots)",
        )
        .or(1);
    if let Some(n) = partitions.filter(|n| *n > MANY_PARTITIONS) {
        ctx.warning(
            &q.at("partitions"),
            format!("{n} partitions: every partition is a stream with its own reader, recovery and trimming work"),
            "partitions scope ordering; a few hundred is plenty for most throughput",
        );
    }
    let partition_by = partition_by(ctx, &q, envelope);
    let group = group(ctx, &q, name);
    let (timeout, handler) = handler(ctx, &q);
    let (min_idle, claim) = claim(ctx, &q, timeout);
    let retry = retry(ctx, &q);
    let poison = q.child(ctx, "poison", &POISON);
    let max_deliveries = poison
        .count(
            ctx,
            "max_deliveries",
            "an entry must be delivered at least once before it can be quarantined",
        )
        .or(5)
        .map(|n| n as u32);
    let dead_letter = dead_letter(ctx, &q);
    let retention = retention(ctx, &q, retry.as_ref(), min_idle, max_deliveries);
    let payload = payload(ctx, &q, envelope);
    let admission = admission(ctx, &q);
    let dedup = dedup(ctx, &q, retention.as_ref());
    let lanes = lanes(ctx, &q, partitions);
    let alerts = alerts(ctx, &q);
    let (pods, replicas_at) = kubernetes::pods(ctx, &q);
    let autoscale = kubernetes::autoscale(ctx, &q, replicas_at.as_ref());
    let results = postgres::results(ctx, &q);
    let outbox = postgres::outbox(ctx, &q);
    if let (Some(Some(ResultStore::Postgres)), Some(handler), Some(pool)) =
        (results, &handler, pool)
    {
        pool.check_serves(ctx, &q, handler.concurrency);
    }
    if !name_ok {
        return None;
    }
    Some(Queue {
        name: name.to_owned(),
        envelope: envelope?.model.as_ref()?.name.clone(),
        partitions: partitions? as u16,
        partition_by: partition_by?,
        group: group?,
        handler: handler?,
        claim: claim?,
        retry: retry?,
        poison: Poison {
            max_deliveries: max_deliveries?,
        },
        dead_letter: dead_letter?,
        retention: retention?,
        payload: payload?,
        admission: admission?,
        alerts: alerts?,
        pods: pods?,
        autoscale: autoscale?,
        results: results?,
        outbox: outbox?,
        dedup: dedup?,
        lanes: lanes?,
    })
}

fn find_envelope<'e>(
    ctx: &mut Ctx<'_>,
    q: &Object<'_>,
    wanted: &str,
    envelopes: &'e [EnvelopeDef],
) -> Option<&'e EnvelopeDef> {
    if let Some(found) = envelopes.iter().find(|e| e.name == wanted) {
        return Some(found);
    }
    let help = if envelopes.is_empty() {
        "declare it under `envelopes`".to_owned()
    } else {
        let names = envelopes.iter().map(|e| e.name.as_str());
        suggest::help(wanted, names, "declared envelopes are")
    };
    ctx.refuse(
        &q.at("envelope"),
        format!("no envelope named `{wanted}`"),
        help,
    )
}

fn partition_by(
    ctx: &mut Ctx<'_>,
    q: &Object<'_>,
    envelope: Option<&EnvelopeDef>,
) -> Option<Vec<String>> {
    q.read(ctx, "partition_by", |ctx, it| {
        let items = values::list(ctx, it, "[tenant, subject_ref]")?;
        if items.is_empty() {
            return ctx.refuse(
                &it.value(),
                "names no field",
                "list at least one field, or leave partition_by out to partition by job_id",
            );
        }
        let mut out: Vec<String> = Vec::new();
        let mut ok = true;
        for field in items {
            let Some(name) = values::string(ctx, &field) else {
                ok = false;
                continue;
            };
            if out.iter().any(|f| f == name) {
                ok = ctx.fail(
                    &field.value(),
                    format!("`{name}` is listed twice"),
                    "list each field once",
                );
                continue;
            }
            ok &= partition_field(ctx, &field, name, envelope);
            out.push(name.to_owned());
        }
        ok.then_some(out)
    })
    .or(vec!["job_id".to_owned()])
}

/// A partition key must be present in every entry: `tenant`, `job_id`, or a
/// required body field.
fn partition_field(
    ctx: &mut Ctx<'_>,
    item: &Item<'_>,
    name: &str,
    envelope: Option<&EnvelopeDef>,
) -> bool {
    if PARTITION_HEADER_FIELDS.contains(&name) {
        return true;
    }
    if names::is_header_field(name) {
        return ctx.fail(
            &item.value(),
            format!("header field `{name}` is not a useful partition key"),
            "partition by `tenant` or `job_id`, or by a required body field",
        );
    }
    let Some((envelope, fields)) = envelope.and_then(|e| Some((e, e.fields.as_ref()?))) else {
        return true;
    };
    let removed_in = envelope.removed.iter().find(|(removed, _)| removed == name);
    match fields.iter().find(|f| f.name == name) {
        Some(field) if field.optional == Some(true) => ctx.fail(
            &item.value(),
            format!(
                "`{name}` is an optional field of {}; entries without it have no partition key",
                envelope.name
            ),
            format!("make `{name}` required (drop `optional: true`) or partition by another field"),
        ),
        Some(_) => true,
        None if removed_in.is_some() => ctx.fail(
            &item.value(),
            format!(
                "`{name}` was removed from {} in schema {}; entries written since do not carry it",
                envelope.name,
                removed_in.map_or(0, |(_, version)| *version)
            ),
            "partition by fields the current schema has; changing the key moves each ordering key to another partition, so drain the queue first",
        ),
        None => {
            let mut candidates: Vec<&str> = PARTITION_HEADER_FIELDS.to_vec();
            for field in fields.iter().filter(|f| f.optional == Some(false)) {
                if !candidates.contains(&field.name.as_str()) {
                    candidates.push(&field.name);
                }
            }
            ctx.fail(
                &item.value(),
                format!("{} has no field `{name}`", envelope.name),
                suggest::help(name, candidates.iter().copied(), "partition by one of"),
            )
        }
    }
}

fn group(ctx: &mut Ctx<'_>, q: &Object<'_>, queue: &str) -> Option<Group> {
    let g = q.child(ctx, "group", &GROUP);
    let name = g
        .read(ctx, "name", |ctx, it| {
            let name = values::string(ctx, it)?;
            names::check_key_safe(ctx, &it.value(), name, "group name").then(|| name.to_owned())
        })
        .or(format!("{queue}-workers"));
    let start = g.read(ctx, "start", group_start).or(GroupStart::NewEntries);
    let prune_consumers_after = g
        .read(ctx, "prune_consumers_after", |ctx, it| {
            let after = values::duration(ctx, it)?;
            if after < MIN_PRUNE_CONSUMERS_AFTER {
                return ctx.refuse(
                    &it.value(),
                    format!(
                        "{} is less than 1m: a worker between two reads would be removed and come back as a new consumer over and over",
                        format_duration(after)
                    ),
                    "set group.prune_consumers_after to 1m or more (default 1d)",
                );
            }
            Some(after)
        })
        .or(DEFAULT_PRUNE_CONSUMERS_AFTER);
    if let Some(GroupStart::Beginning) = start {
        ctx.warning(
            &g.at("start"),
            "starts at 0-0: the first deploy, and every new group name, replays every entry still in the stream",
            "use \"$\" unless replaying retained entries is intended",
        );
    }
    Some(Group {
        name: name?,
        start: start?,
        prune_consumers_after: prune_consumers_after?,
    })
}

fn group_start(ctx: &mut Ctx<'_>, item: &Item<'_>) -> Option<GroupStart> {
    let text = match item.node {
        Node::Str(text) => text.clone(),
        Node::Int(n) if *n >= 0 => n.to_string(),
        _ => String::new(),
    };
    if text == "$" {
        return Some(GroupStart::NewEntries);
    }
    match parse_stream_id(&text) {
        Some((0, 0)) => Some(GroupStart::Beginning),
        Some(_) => Some(GroupStart::Id(text)),
        None => {
            let shown = match item.node {
                Node::Str(text) => format!("`{text}`"),
                other => other.kind().to_owned(),
            };
            ctx.refuse(
                &item.value(),
                format!("{shown} is not a group start"),
                "use \"$\" (only new entries), \"0-0\" (the whole stream) or a stream ID such as \"1700000000000-0\"",
            )
        }
    }
}

/// `<ms>` or `<ms>-<seq>`, both u64.
fn parse_stream_id(text: &str) -> Option<(u64, u64)> {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let (ms, seq) = text.split_once('-').unwrap_or((text, "0"));
    if !digits(ms) || !digits(seq) {
        return None;
    }
    Some((ms.parse().ok()?, seq.parse().ok()?))
}

/// The timeout on its own (the claim check needs it even when another
/// handler setting is invalid), and the whole settings.
fn handler(ctx: &mut Ctx<'_>, q: &Object<'_>) -> (Option<Duration>, Option<HandlerSettings>) {
    let h = q.child(ctx, "handler", &HANDLER);
    let timeout = h.read(ctx, "timeout", values::duration).or(secs(30));
    let concurrency = h
        .count(
            ctx,
            "concurrency",
            "a worker needs to run at least one job at a time",
        )
        .or(8);
    if let Some(n) = concurrency.filter(|n| *n > MANY_CONCURRENT) {
        ctx.warning(
            &h.at("concurrency"),
            format!("{n} jobs at once: one worker process reads that many entries ahead and holds them all in memory"),
            "run more worker processes instead of one very wide one",
        );
    }
    let shutdown_budget = h
        .read(ctx, "shutdown_budget", values::duration)
        .or(secs(10));
    let rate = rate(ctx, &h);
    let tenant_rate = tenant_rate(ctx, &h, rate.flatten());
    let settings = (|| {
        Some(HandlerSettings {
            timeout: timeout?,
            concurrency: concurrency? as u32,
            shutdown_budget: shutdown_budget?,
            rate: rate?,
            tenant_rate: tenant_rate?,
        })
    })();
    (timeout, settings)
}

/// `handler.rate`: `Some(None)` when absent (no limit), `None` when invalid.
fn rate(ctx: &mut Ctx<'_>, h: &Object<'_>) -> Option<Option<Rate>> {
    if h.get("rate").is_none() {
        return Some(None);
    }
    let r = h.child(ctx, "rate", &RATE);
    let limit = r.count(
        ctx,
        "limit",
        "a rate of 0 would never start a job: to stop a queue's intake for a while use `queuegen pause`; for no limit, remove handler.rate",
    );
    // A missing `limit` or `per` was reported as a required key.
    let (Read::Ok(limit), Read::Ok(per)) = (limit, r.read(ctx, "per", rate_per)) else {
        return None;
    };
    let limit = limit as u32;
    Some(Some(Rate { limit, per }))
}

/// The `per` of `handler.rate` or `handler.tenant_rate`: a duration above zero.
fn rate_per(ctx: &mut Ctx<'_>, it: &Item<'_>) -> Option<Duration> {
    if let Node::Str(text) = it.node {
        if units::parse_duration(text).is_ok_and(|d| d.is_zero()) {
            return ctx.refuse(
                &it.value(),
                "a rate per 0s is not a rate: the limit would apply to no time at all",
                "write the period the limit applies to, e.g. `per: 1s` or `per: 1m`",
            );
        }
    }
    values::duration(ctx, it)
}

/// `handler.tenant_rate`: `Some(None)` when absent (no per-tenant limit),
/// `None` when invalid. `queue` is the valid `handler.rate`, if any.
fn tenant_rate(
    ctx: &mut Ctx<'_>,
    h: &Object<'_>,
    queue: Option<Rate>,
) -> Option<Option<TenantRate>> {
    if h.get("tenant_rate").is_none() {
        return Some(None);
    }
    let r = h.child(ctx, "tenant_rate", &TENANT_RATE);
    let limit = r.count(
        ctx,
        "limit",
        "a tenant rate of 0 would never start a job of any tenant: to stop a queue's intake for a while use `queuegen pause`; for no per-tenant limit, remove handler.tenant_rate",
    );
    let per = r.read(ctx, "per", rate_per);
    let classes = r
        .count(
            ctx,
            "classes",
            "use 1 to 4096 classes, or leave `classes` out for 64: each class is one bucket (a Redis key), so their number stays bounded however many tenants there are; more classes, fewer tenants sharing a bucket",
        )
        .or(u64::from(TENANT_CLASSES));
    // A missing `limit` or `per` was reported as a required key.
    let (Read::Ok(limit), Read::Ok(per), Some(classes)) = (limit, per, classes) else {
        return None;
    };
    let (limit, classes) = (limit as u32, classes as u16);
    let tenant = TenantRate {
        limit,
        per,
        classes,
    };
    if let Some(queue) = queue.filter(|queue| never_binds(*queue, tenant)) {
        tenant_rate_never_applies(ctx, &r.at("limit"), queue, tenant);
    }
    Some(Some(tenant))
}

/// Whether `tenant` allows one tenant at least what `queue` allows the
/// whole queue, in rate and in burst: then the queue's bucket always empties
/// first, and the tenant's never holds a job back.
fn never_binds(queue: Rate, tenant: TenantRate) -> bool {
    // tenant.limit / tenant.per >= queue.limit / queue.per, without division.
    let at_least_as_fast = u128::from(tenant.limit) * queue.per.as_nanos()
        >= u128::from(queue.limit) * tenant.per.as_nanos();
    at_least_as_fast && tenant.limit >= queue.limit
}

fn tenant_rate_never_applies(ctx: &mut Ctx<'_>, at: &At, queue: Rate, tenant: TenantRate) {
    let per = format_duration(queue.per);
    let fix = if queue.limit > 1 {
        format!(
            "give a tenant less than the queue: a limit below {} per {per}, e.g. `limit: {}, per: {per}`",
            queue.limit,
            (queue.limit / 10).max(1),
        )
    } else {
        format!(
            "give a tenant less than the queue: 1 job per more than {per}, e.g. `limit: 1, per: {}`",
            format_duration(queue.per.saturating_mul(2)),
        )
    };
    ctx.warning(
        at,
        format!(
            "each tenant may start {} {} per {}, but the whole queue only {} per {} (handler.rate): the queue's limit binds first, so the per-tenant limit never applies",
            tenant.limit,
            if tenant.limit == 1 { "job" } else { "jobs" },
            format_duration(tenant.per),
            queue.limit,
            format_duration(queue.per),
        ),
        format!("{fix}; or remove handler.tenant_rate if the queue's limit is enough"),
    );
}

/// `min_idle` on its own (for the retention check), and the whole section.
fn claim(
    ctx: &mut Ctx<'_>,
    q: &Object<'_>,
    timeout: Option<Duration>,
) -> (Option<Duration>, Option<Claim>) {
    let c = q.child(ctx, "claim", &CLAIM);
    let min_idle = c.read(ctx, "min_idle", values::duration);
    let every = c.read(ctx, "every", values::duration).or(secs(10));
    let batch = c
        .count(
            ctx,
            "batch",
            &format!(
                "one claim takes from 1 to {} entries (the Function library's `claim` limit)",
                limits::library::MAX_CLAIM_COUNT
            ),
        )
        .or(50);
    let rate = c
        .count(
            ctx,
            "rate",
            "recovery must be able to claim at least one entry per second",
        )
        .or(1000);
    let min_idle = match (min_idle, timeout) {
        (Read::Ok(min_idle), Some(timeout)) => {
            let floor = limits::min_claim_idle(timeout);
            if min_idle < floor {
                ctx.refuse(
                    &c.at("min_idle"),
                    format!(
                        "{} is less than handler.timeout ({}) plus the claim margin of {} (max(1s, timeout / 4)): a job still running would be claimed by a second worker",
                        format_duration(min_idle),
                        format_duration(timeout),
                        format_duration(limits::claim_margin(timeout)),
                    ),
                    format!(
                        "set claim.min_idle to at least {}, or leave it out for the default of {} (max(2 × timeout, timeout + margin))",
                        round_up_duration(floor),
                        format_duration(limits::default_claim_min_idle(timeout)),
                    ),
                )
            } else {
                Some(min_idle)
            }
        }
        (Read::Ok(_), None) | (Read::Bad, _) => None,
        (Read::Absent, timeout) => timeout.map(limits::default_claim_min_idle),
    };
    let claim = (|| {
        Some(Claim {
            min_idle: min_idle?,
            every: every?,
            batch: batch? as u32,
            rate: rate? as u32,
        })
    })();
    (min_idle, claim)
}

fn retry(ctx: &mut Ctx<'_>, q: &Object<'_>) -> Option<Retry> {
    let r = q.child(ctx, "retry", &RETRY);
    let max_attempts = r
        .count(
            ctx,
            "max_attempts",
            "max_attempts counts the first attempt, so it is at least 1",
        )
        .or(5);
    let promote_every = r.read(ctx, "promote_every", values::duration).or(secs(1));
    let promote_batch = r
        .count(
            ctx,
            "promote_batch",
            "promote_batch moves at least one retry per call",
        )
        .or(100);
    let b = r.child(ctx, "backoff", &BACKOFF);
    let initial = b.read(ctx, "initial", values::duration);
    let max = b.read(ctx, "max", values::duration);
    let factor = b.read(ctx, "factor", values::factor).or(2.0);
    let jitter = b
        .choice(ctx, "jitter", "jitter", &[Jitter::Full, Jitter::None])
        .or(Jitter::Full);
    let initial_given = initial.is_present();
    let max_given = max.is_present();
    let mut initial = initial.or(secs(1));
    let mut max = max.or(secs(300));
    if let (Some(i), Some(m)) = (initial, max) {
        if i > m {
            let default_note = |given: bool| if given { "" } else { " (the default)" };
            let (at, fix) = if initial_given {
                (
                    b.at("initial"),
                    "lower backoff.initial or raise backoff.max",
                )
            } else {
                (b.at("max"), "raise backoff.max or lower backoff.initial")
            };
            ctx.error(
                &at,
                format!(
                    "backoff.initial {}{} is longer than backoff.max {}{}",
                    format_duration(i),
                    default_note(initial_given),
                    format_duration(m),
                    default_note(max_given),
                ),
                format!("{fix}: the first delay cannot exceed the cap"),
            );
            initial = None;
            max = None;
        }
    }
    Some(Retry {
        max_attempts: max_attempts? as u32,
        promote_every: promote_every?,
        promote_batch: promote_batch? as u32,
        backoff: Backoff {
            initial: initial?,
            max: max?,
            factor: factor?,
            jitter: jitter?,
        },
    })
}

fn dead_letter(ctx: &mut Ctx<'_>, q: &Object<'_>) -> Option<DeadLetter> {
    let d = q.child(ctx, "dead_letter", &DEAD_LETTER);
    let retention = d
        .read(ctx, "retention", values::duration)
        .or(secs(14 * 86_400));
    let max_len = d
        .count(
            ctx,
            "max_len",
            "keep at least one dead letter per partition",
        )
        .or(100_000);
    let owner = d
        .read(ctx, "owner", |ctx, it| {
            let owner = values::string(ctx, it)?;
            if owner.trim().is_empty() {
                return ctx.refuse(
                    &it.value(),
                    "owner is empty",
                    "name the team or person paged for dead letters",
                );
            }
            Some(owner.to_owned())
        })
        .optional();
    if let Some(None) = owner {
        ctx.warning(
            &d.at("owner"),
            "no owner: nobody is named to handle this queue's dead letters",
            "set dead_letter.owner to the team or person paged for them, e.g. owner: docs-oncall",
        );
    }
    Some(DeadLetter {
        retention: retention?,
        max_len: max_len?,
        owner: owner?,
    })
}

fn retention(
    ctx: &mut Ctx<'_>,
    q: &Object<'_>,
    retry: Option<&Retry>,
    min_idle: Option<Duration>,
    max_deliveries: Option<u32>,
) -> Option<Retention> {
    let r = q.child(ctx, "retention", &RETENTION);
    let read = r.read(ctx, "min_age", values::duration);
    let given = read.is_present();
    let trim_every = r.read(ctx, "trim_every", values::duration).or(secs(60));
    let trim = r
        .choice(
            ctx,
            "trim",
            "trim mode",
            &[TrimMode::InProcess, TrimMode::CronJob],
        )
        .or(TrimMode::InProcess);
    let on_ack = r
        .choice(ctx, "on_ack", "on_ack", &[OnAck::Keep, OnAck::Delete])
        .or(OnAck::Keep);
    if let (Some(TrimMode::CronJob), Some(every)) = (trim, trim_every) {
        if limits::cron_schedule(every).is_none() {
            return ctx.refuse(
                &r.at("trim_every"),
                format!(
                    "{} cannot be a CronJob schedule: cron runs at most once a minute, on whole minutes or hours",
                    format_duration(every)
                ),
                "with `trim: cronjob`, set trim_every to whole minutes below an hour (e.g. 5m) or whole hours dividing a day (1h, 2h, 3h, 4h, 6h, 8h, 12h, 24h)",
            );
        }
    }
    let min_age = read.or(secs(3 * 86_400))?;
    if let (Some(retry), Some(min_idle), Some(max_deliveries)) = (retry, min_idle, max_deliveries) {
        let floor = RetentionFloor {
            retry_horizon: retry.backoff.horizon(retry.max_attempts),
            claim_window: min_idle.saturating_mul(max_deliveries),
        };
        if min_age < floor.total() {
            let b = &retry.backoff;
            return ctx.refuse(
                &r.at("min_age"),
                format!(
                    "{}{} is shorter than the {} a job can stay in flight: {} of retry backoff ({} attempts, initial {}, factor {}, max {}) + {} of claim and poison windows (claim.min_idle {} × poison.max_deliveries {})",
                    format_duration(min_age),
                    if given { "" } else { " (the default)" },
                    format_duration(floor.total()),
                    format_duration(floor.retry_horizon),
                    retry.max_attempts,
                    format_duration(b.initial),
                    b.factor,
                    format_duration(b.max),
                    format_duration(floor.claim_window),
                    format_duration(min_idle),
                    max_deliveries,
                ),
                format!(
                    "set retention.min_age to at least {}, so entries are not trimmed while a job may still need them",
                    round_up_duration(floor.total())
                ),
            );
        }
    }
    Some(Retention {
        min_age,
        trim_every: trim_every?,
        trim: trim?,
        on_ack: on_ack?,
    })
}

/// A queue's `dedup`: `Some(None)` when left out. The window may not outlast
/// `retention.min_age`: a duplicate answers the first entry's stream ID,
/// which must still name an entry.
fn dedup(
    ctx: &mut Ctx<'_>,
    q: &Object<'_>,
    retention: Option<&Retention>,
) -> Option<Option<Dedup>> {
    if q.get("dedup").is_none() {
        return Some(None);
    }
    let d = q.child(ctx, "dedup", &DEDUP);
    let window = d
        .read(ctx, "window", values::duration)
        .optional()
        .flatten()?;
    if let Some(retention) = retention {
        if retention.on_ack == OnAck::Delete {
            return ctx.refuse(
                &d.at("window"),
                "dedup with retention.on_ack: delete: a duplicate answers the first entry's stream ID, and that entry is deleted as soon as its job is done".to_owned(),
                "leave out dedup, or set retention.on_ack: keep (the default) so the first entry stays for retention.min_age",
            );
        }
        if window > retention.min_age {
            return ctx.refuse(
                &d.at("window"),
                format!(
                    "dedup.window {} is longer than retention.min_age {}: a duplicate would answer the ID of an entry that may already be trimmed",
                    format_duration(window),
                    format_duration(retention.min_age),
                ),
                format!(
                    "shorten dedup.window to at most {}, or raise retention.min_age to at least {}",
                    format_duration(retention.min_age),
                    format_duration(window),
                ),
            );
        }
    }
    Some(Some(Dedup { window }))
}

/// A queue's `lanes`: empty when left out; otherwise 2 to 16 lanes with
/// distinct names and exactly one default (the first when none is marked).
/// Every problem of every lane is reported.
fn lanes(ctx: &mut Ctx<'_>, q: &Object<'_>, partitions: Option<u64>) -> Option<Vec<Lane>> {
    let lanes = q
        .read(ctx, "lanes", |ctx, it| {
            let items = values::list(
                ctx,
                it,
                "[{ name: high, weight: 6 }, { name: normal, weight: 3, default: true }, { name: low }]",
            )?;
            let mut ok = true;
            let mut out: Vec<Lane> = Vec::with_capacity(items.len());
            // Each distinct name with where it was first given, and the
            // lane first marked as the default.
            let mut named: Vec<(String, Pos)> = Vec::new();
            let mut marked: Option<(Option<String>, Pos)> = None;
            for item in &items {
                let l = object(ctx, item, &LANE);
                let name = l.read(ctx, "name", |ctx, it| {
                    let name = values::string(ctx, it)?;
                    names::check_lane_name(ctx, &it.value(), name).then(|| name.to_owned())
                });
                let weight = l
                    .count(
                        ctx,
                        "weight",
                        "write a weight from 1 to 1000: weights are shares relative to each other (6, 3 and 1 give 60%, 30% and 10% while every lane has a backlog), and no lane may starve",
                    )
                    .or(1);
                let default = l.read(ctx, "default", values::boolean).or(false);
                if let Read::Ok(name) = &name {
                    let here = ctx.position(&l.at("name"));
                    if let Some((_, first)) = named.iter().find(|(n, _)| n == name) {
                        ok = ctx.fail(
                            &l.at("name"),
                            format!(
                                "two lanes are named `{name}` (the first on {}): the name is part of the lane's keys, so both would be one stream",
                                first_at(*first, here)
                            ),
                            "rename one of them, or merge the two into one lane",
                        );
                    } else {
                        named.push((name.clone(), here));
                    }
                }
                if default == Some(true) {
                    let here = ctx.position(&l.at("default"));
                    match &marked {
                        Some((first, at)) => {
                            let first = match first {
                                Some(name) => format!("lane `{name}`"),
                                None => "another lane".to_owned(),
                            };
                            ok = ctx.fail(
                                &l.at("default"),
                                format!(
                                    "a second default lane: {first} is already marked `default: true` (on {}), and jobs published without a lane go to exactly one lane",
                                    first_at(*at, here)
                                ),
                                "keep `default: true` on one lane only (the default lane keeps the queue's unlaned keys, so changing it later swaps the two lanes' backlogs)",
                            );
                        }
                        None => {
                            let name = match &name {
                                Read::Ok(name) => Some(name.clone()),
                                _ => None,
                            };
                            marked = Some((name, here));
                        }
                    }
                }
                match (name, weight, default) {
                    (Read::Ok(name), Some(weight), Some(default)) => out.push(Lane {
                        name,
                        weight: weight as u32,
                        default,
                    }),
                    // Reported above, or a missing `name` reported as a required key.
                    _ => ok = false,
                }
            }
            match items.len() {
                n @ (0 | 1) => {
                    let why = if n == 0 {
                        "lists no lane: no lanes is the same as one unnamed lane"
                    } else {
                        "lists one lane: one lane is the same as no lanes"
                    };
                    ok = ctx.fail(&it.value(), why, "leave `lanes` out, or list at least two");
                }
                n if n > MAX_LANES => ok = ctx.fail(
                        &it.value(),
                        format!(
                            "{n} lanes, more than {MAX_LANES}: each lane is another stream per partition that every worker of the queue reads"
                        ),
                        format!(
                            "merge lanes into at most {MAX_LANES} priority classes; work that needs capacity of its own belongs in a queue of its own"
                        ),
                    ),
                _ => {}
            }
            if !ok {
                return None;
            }
            if !out.iter().any(|l| l.default) {
                out[0].default = true;
            }
            Some(out)
        })
        .or(Vec::new())?;
    if let Some(partitions) = partitions.filter(|_| !lanes.is_empty()) {
        let streams = partitions * lanes.len() as u64;
        if streams > MAX_STREAMS {
            // The runtime numbers a queue's streams (lane × partition) in 16 bits.
            return ctx.refuse(
                &q.at("lanes"),
                format!(
                    "{partitions} partitions × {} lanes = {streams} streams, more than {MAX_STREAMS}",
                    lanes.len()
                ),
                format!(
                    "keep partitions × lanes at most {MAX_STREAMS}: use fewer partitions or fewer lanes"
                ),
            );
        }
        if streams > MANY_PARTITIONS {
            ctx.warning(
                &q.at("lanes"),
                format!(
                    "{partitions} {} × {} lanes = {streams} streams: every lane of every partition is a stream with its own reader, recovery and trimming work",
                    if partitions == 1 { "partition" } else { "partitions" },
                    lanes.len()
                ),
                format!(
                    "keep partitions × lanes at most {MANY_PARTITIONS}: use fewer partitions (they scope ordering; a few hundred is plenty for most throughput) or fewer lanes"
                ),
            );
        }
    }
    Some(lanes)
}

/// Most streams (partitions × lanes) a queue may have: as many as partitions.
const MAX_STREAMS: u64 = 16384;

fn admission(ctx: &mut Ctx<'_>, q: &Object<'_>) -> Option<Admission> {
    let a = q.child(ctx, "admission", &ADMISSION);
    let max_oldest_ready_age = a
        .read(ctx, "max_oldest_ready_age", values::duration)
        .optional();
    let refresh = a.read(ctx, "refresh", values::duration).or(secs(1));
    Some(Admission {
        max_oldest_ready_age: max_oldest_ready_age?,
        refresh: refresh?,
    })
}

fn payload(ctx: &mut Ctx<'_>, q: &Object<'_>, envelope: Option<&EnvelopeDef>) -> Option<Payload> {
    let p = q.child(ctx, "payload", &PAYLOAD);
    let read = p.read(ctx, "max_bytes", values::size);
    let shape = p
        .choice(ctx, "shape", "entry shape", &EntryShape::ALL)
        .or(EntryShape::Packed);
    let given = read.is_present();
    let max_bytes = read.or(65_536)?;
    let shape = shape?;
    if let Some(envelope) = envelope.and_then(|e| e.model.as_ref()) {
        let header = limits::header_max_bytes(&envelope.name);
        let (body, unbounded) = limits::body_max_bytes(envelope);
        let needed = header + body;
        if needed > max_bytes {
            let not_counted = if unbounded.is_empty() {
                String::new()
            } else {
                format!(
                    ", not counting {} (no max_bytes)",
                    unbounded
                        .iter()
                        .map(|f| format!("`{f}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            return ctx.refuse(
                &p.at("max_bytes"),
                format!(
                    "{}{} is less than the {needed} bytes one {} entry can need: {header} for the header fields + {body} for the body fields{not_counted}",
                    format_size(max_bytes),
                    if given { "" } else { " (the default)" },
                    envelope.name,
                ),
                format!(
                    "raise payload.max_bytes to at least {needed}, or lower the fields' max_bytes (the header allowance per field is listed in docs/spec.md)"
                ),
            );
        }
    }
    Some(Payload { max_bytes, shape })
}

fn alerts(ctx: &mut Ctx<'_>, q: &Object<'_>) -> Option<Alerts> {
    let a = q.child(ctx, "alerts", &ALERTS);
    let oldest_pending_age = a
        .read(ctx, "oldest_pending_age", values::duration)
        .optional();
    let oldest_ready_age = a.read(ctx, "oldest_ready_age", values::duration).optional();
    let dead_letters = a
        .count(
            ctx,
            "dead_letters",
            "alert at 1 to be told about every dead letter",
        )
        .optional();
    Some(Alerts {
        oldest_pending_age: oldest_pending_age?,
        oldest_ready_age: oldest_ready_age?,
        dead_letters: dead_letters?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A valid spec whose queue `orders` has `queue` as extra keys.
    fn orders(queue: &str) -> String {
        format!(
            "version: 1\nservice: shop\nenvelopes:\n  OrderPlaced:\n    schema: 1\nqueues:\n  orders:\n    envelope: OrderPlaced\n    dead_letter: {{ owner: shop-oncall }}\n{queue}"
        )
    }

    fn lanes_of(queue: &str) -> Vec<Lane> {
        let checked = crate::check_str(&orders(queue), "q.yaml");
        let spec = checked
            .spec
            .unwrap_or_else(|| panic!("{queue}\n{:#?}", checked.diagnostics));
        spec.queues[0].lanes.clone()
    }

    fn lane(name: &str, weight: u32, default: bool) -> Lane {
        Lane {
            name: name.to_owned(),
            weight,
            default,
        }
    }

    #[test]
    fn without_lanes_a_queue_has_one_unnamed_lane() {
        let checked = crate::check_str(&orders(""), "q.yaml");
        let spec = checked.spec.expect("valid");
        assert!(spec.queues[0].lanes.is_empty());
        assert_eq!(spec.queues[0].default_lane(), None);
    }

    #[test]
    fn the_first_lane_is_the_default_when_none_is_marked() {
        let lanes = lanes_of("    lanes:\n      - { name: high, weight: 6 }\n      - { name: low, default: false }\n");
        assert_eq!(lanes, [lane("high", 6, true), lane("low", 1, false)]);
    }

    #[test]
    fn a_marked_default_is_the_only_default() {
        let queue = "    lanes:\n      - { name: high, weight: 6 }\n      - { name: normal, weight: 3, default: true }\n      - { name: low, weight: 1 }\n";
        let checked = crate::check_str(&orders(queue), "q.yaml");
        let spec = checked.spec.expect("valid");
        let q = &spec.queues[0];
        assert_eq!(
            q.lanes,
            [
                lane("high", 6, false),
                lane("normal", 3, true),
                lane("low", 1, false)
            ]
        );
        assert_eq!(q.default_lane(), Some(&q.lanes[1]));
        assert!(checked.diagnostics.is_empty(), "{:#?}", checked.diagnostics);
    }

    #[test]
    fn a_lane_weighs_1_unless_told() {
        let lanes = lanes_of("    lanes: [{ name: a }, { name: b, weight: 1000 }]\n");
        assert_eq!(lanes, [lane("a", 1, true), lane("b", 1000, false)]);
    }

    /// (line, column, message) of each diagnostic.
    fn problems(queue: &str) -> Vec<(usize, usize, String)> {
        let checked = crate::check_str(&orders(queue), "q.yaml");
        assert!(checked.spec.is_none() || !checked.has_errors());
        checked
            .diagnostics
            .iter()
            .map(|d| (d.line, d.column, d.message.clone()))
            .collect()
    }

    #[test]
    fn lane_problems_are_all_reported_at_their_token() {
        // Line 10 is the first line after `dead_letter`.
        let found = problems(
            "    lanes:\n      - { name: high, weight: 0 }\n      - { name: high, default: true }\n      - { name: Low, default: true }\n      - { weight: 2, colour: red }\n",
        );
        let at: Vec<(usize, usize)> = found.iter().map(|f| (f.0, f.1)).collect();
        assert_eq!(
            at,
            [(11, 31), (12, 17), (13, 17), (13, 31), (14, 9), (14, 22)],
            "{found:#?}"
        );
        assert!(found[1]
            .2
            .starts_with("two lanes are named `high` (the first on line 11)"));
        assert!(found[3]
            .2
            .starts_with("a second default lane: lane `high` is already marked"));
        assert!(
            found[4].2.contains("missing required key `name`"),
            "{found:#?}"
        );
        assert_eq!(found[5].2, "unknown key");
    }

    #[test]
    fn one_lane_none_and_too_many_are_refused() {
        for queue in [
            "    lanes: []\n".to_owned(),
            "    lanes: [{ name: only }]\n".to_owned(),
            format!(
                "    lanes: [{}]\n",
                (0..17)
                    .map(|i| format!("{{ name: l{i} }}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ] {
            let found = problems(&queue);
            assert_eq!(found.len(), 1, "{queue}: {found:#?}");
            assert_eq!((found[0].0, found[0].1), (10, 12), "{found:#?}");
        }
        assert_eq!(
            lanes_of(&format!(
                "    lanes: [{}]\n",
                (0..16)
                    .map(|i| format!("{{ name: l{i} }}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
            .len(),
            16
        );
    }

    #[test]
    fn many_partitions_times_lanes_is_a_warning() {
        let checked = crate::check_str(
            &orders("    partitions: 512\n    lanes: [{ name: a }, { name: b }, { name: c }]\n"),
            "q.yaml",
        );
        assert!(checked.spec.is_some());
        let [warning] = checked.diagnostics.as_slice() else {
            panic!("{:#?}", checked.diagnostics);
        };
        assert_eq!(
            (warning.line, warning.path.as_str()),
            (11, "queues.orders.lanes")
        );
        assert!(
            warning
                .message
                .starts_with("512 partitions × 3 lanes = 1536 streams"),
            "{warning}"
        );
        let quiet = crate::check_str(
            &orders("    partitions: 512\n    lanes: [{ name: a }, { name: b }]\n"),
            "q.yaml",
        );
        assert!(quiet.diagnostics.is_empty(), "{:#?}", quiet.diagnostics);
    }

    fn handler_of(queue: &str) -> HandlerSettings {
        let checked = crate::check_str(&orders(queue), "q.yaml");
        assert!(checked.diagnostics.is_empty(), "{:#?}", checked.diagnostics);
        let spec = checked.spec.expect("valid");
        spec.queues[0].handler.clone()
    }

    #[test]
    fn tenant_rate_is_none_unless_given() {
        let handler = handler_of("    handler: { rate: { limit: 100, per: 1s } }\n");
        assert_eq!(handler.tenant_rate, None);
        assert_eq!(handler_of("").tenant_rate, None);
    }

    #[test]
    fn tenant_rate_has_64_classes_unless_told() {
        let handler = handler_of("    handler:\n      tenant_rate: { limit: 10, per: 1s }\n");
        assert_eq!(
            handler.tenant_rate,
            Some(TenantRate {
                limit: 10,
                per: secs(1),
                classes: 64
            })
        );
        assert_eq!(handler.rate, None);
        let both = handler_of(
            "    handler:\n      rate: { limit: 100, per: 1s }\n      tenant_rate: { limit: 10, per: 1m, classes: 4096 }\n",
        );
        assert_eq!(
            both.tenant_rate,
            Some(TenantRate {
                limit: 10,
                per: secs(60),
                classes: 4096
            })
        );
        assert_eq!(
            both.rate,
            Some(Rate {
                limit: 100,
                per: secs(1)
            })
        );
        let one = handler_of("    handler: { tenant_rate: { limit: 1, per: 1s, classes: 1 } }\n");
        assert_eq!(one.tenant_rate.map(|t| t.classes), Some(1));
    }

    #[test]
    fn a_tenant_rate_binds_unless_it_allows_the_queues_rate_and_burst() {
        let queue = |limit, per| Rate {
            limit,
            per: secs(per),
        };
        let tenant = |limit, per| TenantRate {
            limit,
            per: secs(per),
            classes: 64,
        };
        // Faster and a larger burst, or the same: never binds.
        assert!(never_binds(queue(5, 1), tenant(10, 1)));
        assert!(never_binds(queue(100, 1), tenant(100, 1)));
        assert!(never_binds(queue(100, 1), tenant(6000, 60)));
        // Slower: binds.
        assert!(!never_binds(queue(100, 1), tenant(10, 1)));
        assert!(!never_binds(queue(100, 1), tenant(100, 2)));
        // Faster, but a smaller burst: binds after a quiet period.
        assert!(!never_binds(queue(6000, 60), tenant(150, 1)));
    }

    #[test]
    fn tenant_rate_problems_are_all_reported_at_their_token() {
        // Line 10 is the first line after `dead_letter`.
        let found = problems(
            "    handler:\n      tenant_rate: { limit: 0, per: 0s, classes: 0, burst: 5 }\n",
        );
        let at: Vec<(usize, usize)> = found.iter().map(|f| (f.0, f.1)).collect();
        assert_eq!(at, [(11, 29), (11, 37), (11, 50), (11, 53)], "{found:#?}");
        assert_eq!(found[0].2, "must be at least 1, found 0");
        assert!(found[1].2.starts_with("a rate per 0s is not a rate"));
        assert_eq!(found[2].2, "must be at least 1, found 0");
        assert_eq!(found[3].2, "unknown key");
        let found = problems("    handler: { tenant_rate: { per: 1s, classes: 4097 } }\n");
        assert_eq!(found.len(), 2, "{found:#?}");
        assert!(found[0].2.contains("missing required key `limit`"));
        assert_eq!(found[1].2, "must be at most 4096, found 4097");
    }

    #[test]
    fn stream_ids() {
        assert_eq!(parse_stream_id("0-0"), Some((0, 0)));
        assert_eq!(parse_stream_id("0"), Some((0, 0)));
        assert_eq!(
            parse_stream_id("1700000000000-5"),
            Some((1_700_000_000_000, 5))
        );
        assert_eq!(
            parse_stream_id("1700000000000"),
            Some((1_700_000_000_000, 0))
        );
        for bad in [
            "",
            "$x",
            "-1",
            "1-",
            "1-2-3",
            "a-b",
            "99999999999999999999-0",
            "1 - 2",
        ] {
            assert_eq!(parse_stream_id(bad), None, "{bad}");
        }
    }
}
