//! Format version 1 of queues.yaml: the version gate, then the whole document
//! read strictly into the normalized model, every problem reported at once.

mod changes;
mod envelope;
pub mod format;
mod kubernetes;
mod names;
mod pipeline;
mod postgres;
mod queue;
mod read;
mod schedule;
mod values;

use crate::model::{Deployment, Envelope, Persistence, Queue, RedisSettings, Spec};
use crate::yaml::Node;

use envelope::EnvelopeDef;
use format::{REDIS, SPEC};
use postgres::PostgresUse;
use read::{entries, object, Item, Object};

pub(crate) use read::Ctx;

/// The only format version this queuegen reads.
pub const VERSION: u32 = 1;

/// Reads a parsed document. Returns the model when nothing was wrong enough
/// to stop building it; the caller discards it if any error was reported.
pub(crate) fn load(ctx: &mut Ctx<'_>, root: &Node) -> Option<Spec> {
    let item = Item::root(root);
    if !version_is_supported(ctx, &item) {
        return None;
    }
    let spec = object(ctx, &item, &SPEC);
    let service = spec
        .read(ctx, "service", |ctx, it| {
            let name = values::string(ctx, it)?;
            names::check_lower_name(ctx, &it.value(), name, "service").then(|| name.to_owned())
        })
        .or(String::new());
    let redis = redis(ctx, &spec, service.as_deref());
    let postgres_use = PostgresUse::of(spec.get("queues").map(|it| it.node));
    let kubernetes = kubernetes::kubernetes(ctx, &spec, service.as_deref(), &postgres_use);
    let (postgres, pool) = postgres::settings(ctx, &spec, postgres_use.maybe());
    let envelopes = named(
        ctx,
        &spec,
        "envelopes",
        "a mapping of envelope names to envelopes",
        |ctx, name, it| envelope::envelope(ctx, name, it),
    );
    let known: Option<&[EnvelopeDef]> = envelopes.as_deref();
    let all_envelopes: &[EnvelopeDef] = known.unwrap_or(&[]);
    // The envelopes the queues name, as written (for the unused-envelope check).
    let mut carried: Vec<&str> = Vec::new();
    let queues = named(
        ctx,
        &spec,
        "queues",
        "a mapping of queue names to queues",
        |ctx, name, it| {
            carried.extend(declared_envelope(it));
            queue::queue(ctx, name, it, known, pool)
        },
    );
    if queues.as_ref().is_some_and(Vec::is_empty) {
        ctx.error(
            &spec.at("queues"),
            "declares no queue",
            "add at least one queue, e.g. `ocr: { envelope: OcrRequested }`",
        );
    }
    // An envelope no queue carries is only worth a warning when the queues
    // themselves could be read.
    if queues.is_some() {
        for envelope in all_envelopes
            .iter()
            .filter(|e| !carried.contains(&e.name.as_str()))
        {
            ctx.warning(
                &envelope.at,
                "envelope is not carried by any queue",
                "remove it, or name it in a queue's `envelope`",
            );
        }
    }
    let schedules = {
        let queue_models: Vec<&Queue> = queues.iter().flatten().flatten().collect();
        let envelope_models: Vec<&Envelope> = all_envelopes
            .iter()
            .filter_map(|e| e.model.as_ref())
            .collect();
        let known = schedule::Known {
            queue_names: declared_queues(spec.get("queues")),
            queues: queue_models,
            envelopes: envelope_models,
            service: service.as_deref(),
        };
        schedule::schedules(ctx, &spec, &known)
    };
    let pipelines = {
        let known = pipeline::Known {
            queue_names: declared_queues(spec.get("queues")),
            queues: queues.iter().flatten().flatten().collect(),
            envelopes: all_envelopes
                .iter()
                .filter_map(|e| e.model.as_ref())
                .collect(),
        };
        pipeline::pipelines(ctx, &spec, &known)
    };
    let envelopes = envelopes?
        .into_iter()
        .map(|e| e.model)
        .collect::<Option<Vec<_>>>()?;
    let queues = queues?.into_iter().collect::<Option<Vec<_>>>()?;
    Some(Spec {
        version: VERSION,
        service: service?,
        redis: redis?,
        envelopes,
        queues,
        kubernetes: kubernetes?,
        postgres: postgres?,
        schedules: schedules?,
        pipelines: pipelines?,
    })
}

/// `version` is read before anything else: a missing or unknown version is
/// the only problem reported, since the rest may be another format.
fn version_is_supported(ctx: &mut Ctx<'_>, root: &Item<'_>) -> bool {
    let help = format!(
        "queuegen {} reads spec version {VERSION}",
        env!("CARGO_PKG_VERSION")
    );
    let Node::Map(pairs) = root.node else {
        let message = match root.node {
            Node::Null => "the spec is empty".to_owned(),
            other => format!(
                "expected a mapping with version, service, envelopes and queues, found {}",
                other.kind()
            ),
        };
        return ctx.fail(
            &root.value(),
            message,
            format!("start the file with `version: {VERSION}`; {help}"),
        );
    };
    match pairs.iter().find(|(k, _)| k.key_text() == "version") {
        None => ctx.fail(
            &root.value().about("version".to_owned()),
            "missing `version`",
            format!("add `version: {VERSION}` as the first line; {help}"),
        ),
        Some((_, Node::Int(v))) if *v == i128::from(VERSION) => true,
        Some((_, value @ Node::Str(text))) if text.trim() == VERSION.to_string() => {
            let at = root.entry("version", 0, value).value();
            ctx.fail(
                &at,
                format!("version must be the integer {VERSION}, found the string \"{text}\""),
                format!("write `version: {VERSION}` without quotes"),
            )
        }
        Some((_, value)) => {
            let shown = match value {
                Node::Str(s) => format!("\"{s}\""),
                other @ (Node::Int(_) | Node::Float(_) | Node::Bool(_)) => other.key_text(),
                other => other.kind().to_owned(),
            };
            let at = root.entry("version", 0, value).value();
            ctx.fail(&at, format!("unknown spec version {shown}"), help)
        }
    }
}

fn redis(ctx: &mut Ctx<'_>, spec: &Object<'_>, service: Option<&str>) -> Option<RedisSettings> {
    let r = spec.child(ctx, "redis", &REDIS);
    let key_prefix = r.read(ctx, "key_prefix", |ctx, it| {
        let prefix = values::string(ctx, it)?;
        names::check_key_safe(ctx, &it.value(), prefix, "key prefix").then(|| prefix.to_owned())
    });
    let key_prefix = match key_prefix {
        read::Read::Absent => service.map(str::to_owned),
        other => other.or(String::new()),
    };
    let deployment = r
        .choice(
            ctx,
            "deployment",
            "deployment",
            &[Deployment::Standalone, Deployment::Cluster],
        )
        .or(Deployment::Standalone);
    let min_version = r
        .read(ctx, "min_version", |ctx, it| {
            let text = values::string(ctx, it)?;
            match parse_redis_version(text) {
                None => ctx.refuse(
                    &it.value(),
                    format!("`{text}` is not a Redis version"),
                    "write major.minor (or major.minor.patch) in quotes, e.g. \"7.0\"",
                ),
                Some((major, _)) if major < 7 => ctx.refuse(
                    &it.value(),
                    format!(
                        "Redis {text} is too old: queues run on Redis Functions, which need 7.0"
                    ),
                    "set min_version to \"7.0\" or later and upgrade the deployment",
                ),
                Some(_) => Some(text.to_owned()),
            }
        })
        .or("7.0".to_owned());
    let wait_replicas = r
        .count(
            ctx,
            "wait_replicas",
            "wait_replicas is how many replicas a publish waits for (0: none)",
        )
        .or(0)
        .map(|n| n as u32);
    let wait_timeout = r
        .read(ctx, "wait_timeout", values::duration)
        .or(std::time::Duration::from_secs(1));
    let persistence = r
        .choice(
            ctx,
            "persistence",
            "persistence",
            &[Persistence::EverySec, Persistence::Always],
        )
        .or(Persistence::EverySec);
    Some(RedisSettings {
        key_prefix: key_prefix?,
        deployment: deployment?,
        min_version: min_version?,
        wait_replicas: wait_replicas?,
        wait_timeout: wait_timeout?,
        persistence: persistence?,
    })
}

/// "7.0" or "7.2.4" -> (major, minor).
fn parse_redis_version(text: &str) -> Option<(u32, u32)> {
    let parts: Vec<&str> = text.split('.').collect();
    if !(2..=3).contains(&parts.len()) {
        return None;
    }
    let numbers: Vec<u32> = parts
        .iter()
        .map(|p| {
            (!p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
                .then(|| p.parse().ok())
                .flatten()
        })
        .collect::<Option<_>>()?;
    Some((numbers[0], numbers[1]))
}

/// Reads a required mapping of named entries (envelopes, queues).
fn named<'a, T>(
    ctx: &mut Ctx<'_>,
    spec: &Object<'a>,
    key: &str,
    expected: &str,
    mut each: impl FnMut(&mut Ctx<'_>, &str, &Item<'a>) -> T,
) -> Option<Vec<T>> {
    let item = spec.get(key)?;
    let found = entries(
        ctx,
        item,
        expected,
        &format!("write `{key}:` as a mapping keyed by name"),
    )?;
    Some(found.iter().map(|(name, it)| each(ctx, name, it)).collect())
}

/// Every queue name declared under `queues`, when it is a mapping.
fn declared_queues(queues: Option<&Item<'_>>) -> Option<Vec<String>> {
    match queues?.node {
        Node::Map(pairs) => Some(pairs.iter().map(|(k, _)| k.key_text()).collect()),
        _ => None,
    }
}

/// The envelope a queue names, as written (for the unused-envelope check).
fn declared_envelope<'a>(queue: &Item<'a>) -> Option<&'a str> {
    let Node::Map(pairs) = queue.node else {
        return None;
    };
    pairs
        .iter()
        .find(|(k, _)| k.key_text() == "envelope")
        .and_then(|(_, v)| v.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_versions() {
        assert_eq!(parse_redis_version("7.0"), Some((7, 0)));
        assert_eq!(parse_redis_version("7.2.4"), Some((7, 2)));
        for bad in ["7", "7.", ".0", "7.0.0.1", "seven", "7.x", "+7.0"] {
            assert_eq!(parse_redis_version(bad), None, "{bad}");
        }
    }
}
