//! Schedules (periodic jobs): the queue, the cadence (`cron` in a time zone, or `every`), the constant body checked against the envelope, and what to do about missed ticks.

use std::time::Duration;

use crate::cadence::{self, Cadence};
use crate::diagnostic::Severity;
use crate::limits::HEADER_FIELDS;
use crate::model::{Envelope, FieldType, Missed, Queue, Schedule};
use crate::suggest;
use crate::units::format_duration;
use crate::yaml::Node;

use super::envelope::constant_value;
use super::format::SCHEDULE;
use super::names;
use super::read::{entries, object, optional_entries, Ctx, Item, Object, Read};
use super::values;

/// Longest schedule name: `<name>@<24-byte tick>` stays within the job_id allowance.
const MAX_NAME_BYTES: usize = 100;
/// The payload check's allowance for the tenant header.
const MAX_TENANT_BYTES: usize = 64;

/// Longest default grace.
const MAX_DEFAULT_GRACE: Duration = Duration::from_secs(60);

/// What the schedules can be checked against: every queue name declared,
/// the queues and envelopes that are valid.
pub(crate) struct Known<'m> {
    /// Every queue name in `queues`, valid or not; `None` when `queues` is malformed.
    pub queue_names: Option<Vec<String>>,
    pub queues: Vec<&'m Queue>,
    pub envelopes: Vec<&'m Envelope>,
    pub service: Option<&'m str>,
}

/// Reads `schedules` (optional): the models when all are valid.
pub(crate) fn schedules(
    ctx: &mut Ctx<'_>,
    spec: &Object<'_>,
    known: &Known<'_>,
) -> Option<Vec<Schedule>> {
    let found = optional_entries(
        ctx,
        spec,
        "schedules",
        "a mapping of schedule names to schedules",
        "write `schedules:` as a mapping keyed by name, e.g. `nightly: { queue: export, cron: \"0 2 * * *\" }`",
    )?;
    let all: Vec<Option<Schedule>> = found
        .iter()
        .map(|(name, it)| schedule(ctx, name, it, known))
        .collect();
    all.into_iter().collect()
}

fn schedule(ctx: &mut Ctx<'_>, name: &str, item: &Item<'_>, known: &Known<'_>) -> Option<Schedule> {
    let mut name_ok = names::check_lower_name(ctx, &item.key(), name, "schedule");
    if name_ok && name.len() > MAX_NAME_BYTES {
        ctx.error(
            &item.key(),
            format!(
                "schedule name is {} bytes, more than {MAX_NAME_BYTES}",
                name.len()
            ),
            "shorten it: the job_id `<schedule>@<tick>` must stay within the header's 128 bytes",
        );
        name_ok = false;
    }
    let s = object(ctx, item, &SCHEDULE);
    let queue_name = s.read(ctx, "queue", values::string);
    let queue = match (&queue_name, &known.queue_names) {
        (Read::Ok(wanted), Some(declared)) => find_queue(ctx, &s, wanted, declared, known),
        _ => None,
    };
    let cadence = cadence_of(ctx, &s);
    let tenant = s
        .read(ctx, "tenant", |ctx, it| {
            let text = values::string(ctx, it)?;
            if text.len() > MAX_TENANT_BYTES {
                return ctx.refuse(
                    &it.value(),
                    format!("tenant is {} bytes, more than {MAX_TENANT_BYTES}", text.len()),
                    "shorten it: the payload check allows 64 bytes for the tenant header",
                );
            }
            if text.is_empty() {
                return ctx.refuse(
                    &it.value(),
                    "tenant must not be empty",
                    "name the tenant the jobs belong to, or leave `tenant` out for the service name",
                );
            }
            Some(text.to_owned())
        })
        .or(known.service.unwrap_or_default().to_owned());
    let envelope = queue.and_then(|q| {
        known
            .envelopes
            .iter()
            .find(|e| e.name == q.envelope)
            .copied()
    });
    let body = body(ctx, &s, envelope);
    if let (Some(body), Some(envelope), Some(queue)) = (&body, envelope, queue) {
        let size = crate::limits::header_max_bytes(&envelope.name)
            + body
                .iter()
                .map(|(name, value)| (name.len() + value.len()) as u64)
                .sum::<u64>();
        if size > queue.payload.max_bytes {
            ctx.error(
                &s.at("body"),
                format!(
                    "the jobs can be {size} bytes (header allowance and body), more than queue `{}`'s payload.max_bytes of {}",
                    queue.name, queue.payload.max_bytes
                ),
                "shorten the body's values, or raise the queue's payload.max_bytes",
            );
        }
    }
    let missed = s
        .choice(
            ctx,
            "missed",
            "missed policy",
            &[Missed::Skip, Missed::RunOnce],
        )
        .or(Missed::Skip);
    let default_grace = match &cadence {
        Some(Cadence::Every(period)) => (*period).min(MAX_DEFAULT_GRACE),
        _ => MAX_DEFAULT_GRACE,
    };
    let grace = s.read(ctx, "grace", values::duration).or(default_grace);
    if let (Some(grace), Some(Cadence::Every(period))) = (grace, &cadence) {
        if s.get("grace").is_some() && grace > *period * 10 {
            ctx.warning(
                &s.at("grace"),
                format!(
                    "grace {} is more than ten periods of `every` ({}): after an outage, ticks that old are still published one by one",
                    format_duration(grace),
                    format_duration(*period)
                ),
                "a grace of one period or less lets `missed` decide about ticks an outage skipped",
            );
        }
    }
    if !name_ok {
        return None;
    }
    Some(Schedule {
        name: name.to_owned(),
        queue: queue?.name.clone(),
        cadence: cadence?,
        tenant: tenant?,
        body: body?,
        missed: missed?,
        grace: grace?,
    })
}

fn find_queue<'m>(
    ctx: &mut Ctx<'_>,
    s: &Object<'_>,
    wanted: &str,
    declared: &[String],
    known: &Known<'m>,
) -> Option<&'m Queue> {
    if !declared.iter().any(|q| q == wanted) {
        let help = suggest::help(
            wanted,
            declared.iter().map(String::as_str),
            "declared queues are",
        );
        return ctx.refuse(
            &s.at("queue"),
            format!("no queue named `{wanted}`"),
            format!("{help}; or declare the queue under `queues`"),
        );
    }
    // A queue that is declared but invalid was reported where it is.
    known.queues.iter().find(|q| q.name == wanted).copied()
}

/// Exactly one of `cron` and `every`; `timezone` only with `cron`.
fn cadence_of(ctx: &mut Ctx<'_>, s: &Object<'_>) -> Option<Cadence> {
    let cron = s.read(ctx, "cron", |ctx, it| {
        let text = values::string(ctx, it)?;
        match cadence::parse_cron(text) {
            Ok(_) => Some(text.to_owned()),
            Err(err) => {
                let help = match err.field {
                    Some(i) => format!(
                        "write the {} field as a number, a range (`1-5`), a list (`1,15`), a step (`*/10`) or `*`; the fields are minute (0-59), hour (0-23), day of month (1-31), month (1-12 or JAN-DEC), day of week (0-7 or SUN-SAT)",
                        cadence::CRON_FIELDS[i]
                    ),
                    None => "write five fields: minute hour day-of-month month day-of-week, e.g. \"0 2 * * *\" for 02:00 every day (seconds and years are not supported)".to_owned(),
                };
                ctx.error_in_string(&it.value(), err.offset, err.message, help);
                None
            }
        }
    });
    let every = s.read(ctx, "every", values::duration);
    let timezone = s.read(ctx, "timezone", |ctx, it| {
        let text = values::string(ctx, it)?;
        match cadence::parse_timezone(text) {
            Ok(_) => Some(text.to_owned()),
            Err(err) => {
                let help = match suggest::did_you_mean(text, cadence::timezone_names()) {
                    Some(best) => format!("did you mean `{best}`?"),
                    None => "write an IANA time zone name such as \"UTC\", \"Europe/Berlin\" or \"America/New_York\"".to_owned(),
                };
                ctx.refuse(&it.value(), err.message, help)
            }
        }
    });
    if cron.is_present() && every.is_present() {
        return ctx.refuse(
            &s.at("every"),
            "a schedule has either `cron` or `every`, not both",
            "keep `cron` for wall-clock times (\"0 2 * * *\"), or `every` for a fixed period; remove the other",
        );
    }
    if !cron.is_present() && !every.is_present() {
        return ctx.refuse(
            &s.anchor(),
            "missing `cron` or `every`: a schedule needs one of them",
            "add `cron: \"0 2 * * *\"` (with `timezone`, default UTC) or `every: 10m`",
        );
    }
    if every.is_present() && timezone.is_present() {
        return ctx.refuse(
            &s.at("timezone"),
            "`timezone` only applies to `cron`",
            "remove `timezone`: `every` ticks at multiples of its period since the Unix epoch, the same instant in every zone",
        );
    }
    match (cron, every) {
        (Read::Ok(expression), _) => Some(Cadence::Cron {
            expression: expression.into(),
            timezone: timezone.or("UTC".to_owned())?.into(),
        }),
        (_, Read::Ok(period)) => {
            if period.subsec_nanos() % 1_000_000 != 0 {
                return None;
            }
            Some(Cadence::Every(period))
        }
        _ => None,
    }
}

/// The body constants: known fields of the envelope, of their types, and
/// every required field without a default given. In the envelope's order.
fn body(
    ctx: &mut Ctx<'_>,
    s: &Object<'_>,
    envelope: Option<&Envelope>,
) -> Option<Vec<(String, String)>> {
    let given = match s.get("body").filter(|it| !matches!(it.node, Node::Null)) {
        None => Vec::new(),
        Some(item) => entries(
            ctx,
            item,
            "a mapping of field names to constants",
            "write `body:` as a mapping of the envelope's fields to values, e.g. `body: { subject_ref: nightly }`",
        )?,
    };
    // Without a valid envelope nothing more can be said.
    let envelope = envelope?;
    let mut ok = true;
    let mut values: Vec<(String, String)> = Vec::new();
    for (field_name, it) in &given {
        if HEADER_FIELDS.iter().any(|h| h.name == field_name) {
            ok = ctx.fail(
                &it.key(),
                format!("`{field_name}` is a header field, which the schedule sets"),
                if field_name == "tenant" {
                    "set the jobs' tenant with the schedule's `tenant` key".to_owned()
                } else {
                    "remove it: the job_id is `<schedule>@<tick>`, and the other header fields are the runtime's".to_owned()
                },
            );
            continue;
        }
        let Some(field) = envelope.field(field_name) else {
            let help = suggest::help(
                field_name,
                envelope.fields.iter().map(|f| f.name.as_str()),
                &format!("the fields of {} are", envelope.name),
            );
            ok = ctx.fail(
                &it.key(),
                format!("envelope {} has no field `{field_name}`", envelope.name),
                help,
            );
            continue;
        };
        match constant_value(ctx, it, &field.ty, field.max_bytes, "value") {
            Some(text) => values.push((field.name.clone(), text)),
            None => ok = false,
        }
    }
    for field in &envelope.fields {
        if field.optional || field.default.is_some() || given.iter().any(|(n, _)| *n == field.name)
        {
            continue;
        }
        let example = match &field.ty {
            FieldType::String => "\"...\"".to_owned(),
            FieldType::Bool => "true".to_owned(),
            FieldType::Timestamp => "\"2026-01-01T00:00:00.000Z\"".to_owned(),
            FieldType::Enum { values } => values.first().cloned().unwrap_or_default(),
            _ => "0".to_owned(),
        };
        ok = ctx.fail(
            &s.at("body"),
            format!(
                "the body lacks `{}`, a required field of envelope {} ({})",
                field.name,
                envelope.name,
                field.ty.spec_name()
            ),
            format!("add `{}: {example}` to `body`", field.name),
        );
    }
    if !ok {
        return None;
    }
    let order = |name: &str| envelope.fields.iter().position(|f| f.name == name);
    values.sort_by_key(|(name, _)| order(name));
    Some(values)
}

impl Ctx<'_> {
    /// An error about the text at byte `offset` of a string value (a cron
    /// field), pointing at its column: past the opening quote of a quoted
    /// scalar. Single-line scalars only; escapes are not counted.
    pub(crate) fn error_in_string(
        &mut self,
        at: &super::read::At,
        offset: usize,
        message: impl Into<String>,
        help: impl Into<String>,
    ) {
        let mut pos = self.position(at);
        let quoted = self
            .source_line(pos.line)
            .and_then(|line| line.chars().nth(pos.column.saturating_sub(1)))
            .is_some_and(|c| c == '"' || c == '\'');
        pos.column += usize::from(quoted) + offset;
        self.push_at(
            Severity::Error,
            pos,
            at.path.clone(),
            message.into(),
            Some(help.into()),
        );
    }
}
