//! The Kubernetes settings: the top-level `kubernetes` section, and each
//! queue's `pods` and `autoscale`, with Kubernetes quantities checked here
//! so that a manifest the cluster would refuse is a `check` error instead.

use crate::compat;
use crate::model::{Autoscale, Kubernetes, Pods};

use super::format::{AUTOSCALE, KUBERNETES, PODS};
use super::postgres::PostgresUse;
use super::read::{At, Ctx, Item, Object, Read};
use super::values;

/// Port of /metrics, /healthz and /readyz unless the spec says otherwise.
pub const DEFAULT_METRICS_PORT: u16 = 9464;
/// The migration Job's image unless the spec says otherwise: the official
/// PostgreSQL image, small, with `psql` and `sh`.
pub const DEFAULT_PSQL_IMAGE: &str = "postgres:16-alpine";

pub(crate) fn kubernetes(
    ctx: &mut Ctx<'_>,
    spec: &Object<'_>,
    service: Option<&str>,
    postgres: &PostgresUse,
) -> Option<Kubernetes> {
    let given = spec.get("kubernetes").is_some();
    let k = spec.child(ctx, "kubernetes", &KUBERNETES);
    let service = service.unwrap_or_default();
    let namespace = k
        .read(ctx, "namespace", |ctx, it| dns_label(ctx, it, "namespace"))
        .or(service.to_owned());
    let image = k
        .read(ctx, "image", token)
        .or(format!("{service}-worker:latest"));
    let monitor_image = k
        .read(ctx, "monitor_image", token)
        .or(format!("queuegen:{}", env!("CARGO_PKG_VERSION")));
    let redis_secret = k
        .read(ctx, "redis_secret", |ctx, it| {
            dns_label(ctx, it, "Secret name")
        })
        .or(format!("{service}-redis"));
    let postgres_secret = k.read(ctx, "postgres_secret", |ctx, it| {
        dns_label(ctx, it, "Secret name")
    });
    let psql_image = k.read(ctx, "psql_image", token);
    let postgres_ok = postgres_keys(ctx, &k, given, service, postgres, &postgres_secret);
    let postgres_secret = postgres_secret.optional();
    let psql_image = psql_image.or(DEFAULT_PSQL_IMAGE.to_owned());
    let metrics_port = k
        .count(ctx, "metrics_port", "a TCP port is 1 to 65535")
        .or(DEFAULT_METRICS_PORT.into())
        .map(|p| p as u16);
    let prometheus_url = k
        .read(ctx, "prometheus_url", |ctx, it| {
            let url = token(ctx, it)?;
            if url.starts_with("http://") || url.starts_with("https://") {
                Some(url)
            } else {
                ctx.refuse(
                    &it.value(),
                    format!("`{url}` is not an http(s) URL"),
                    "write the Prometheus server's URL, e.g. http://prometheus.monitoring.svc:9090",
                )
            }
        })
        .or("http://prometheus.monitoring.svc:9090".to_owned());
    if !postgres_ok {
        return None;
    }
    Some(Kubernetes {
        namespace: namespace?,
        image: image?,
        monitor_image: monitor_image?,
        redis_secret: redis_secret?,
        postgres_secret: postgres_secret?,
        psql_image: psql_image?,
        metrics_port: metrics_port?,
        prometheus_url: prometheus_url?,
    })
}

/// The rules tying `postgres_secret` and `psql_image` to the queues: with a
/// `kubernetes` section, a queue using PostgreSQL needs the Secret (its
/// pods, the outbox publisher and the migration Job read the URL from it);
/// with no queue using PostgreSQL, both keys would be ignored. False when
/// something was reported.
fn postgres_keys(
    ctx: &mut Ctx<'_>,
    k: &Object<'_>,
    given: bool,
    service: &str,
    postgres: &PostgresUse,
    secret: &Read<String>,
) -> bool {
    match postgres {
        PostgresUse::Unknown => true,
        PostgresUse::Unused => {
            let mut ok = true;
            for key in ["postgres_secret", "psql_image"] {
                if let Some(item) = k.get(key) {
                    ok = ctx.fail(
                        &item.key(),
                        "no queue uses PostgreSQL, so nothing in the manifests would read this key",
                        format!(
                            "add `results: postgres` or `outbox: true` to a queue, or remove `{key}`"
                        ),
                    );
                }
            }
            ok
        }
        PostgresUse::By(queues) => {
            if !given || *secret != Read::Absent {
                return true;
            }
            let queues = match queues.as_slice() {
                [one] => format!("queue `{one}` uses"),
                _ => format!("queues {} use", compat::backticked(queues)),
            };
            // A Secret name: `_` is not allowed in one.
            let example = match service.replace('_', "-") {
                name if is_dns_label(&format!("{name}-postgres")) => format!("{name}-postgres"),
                _ => "app-postgres".to_owned(),
            };
            ctx.fail(
                &k.at("postgres_secret"),
                format!(
                    "{queues} PostgreSQL, but `kubernetes` names no Secret with the database URL: the pods that need it (workers of `results: postgres` queues, the outbox publisher, the migration Job) would start without DATABASE_URL and fail"
                ),
                format!(
                    "add `postgres_secret: {example}` under `kubernetes`, naming a Secret whose key `database-url` holds the URL (postgres://user:password@host:5432/database)"
                ),
            )
        }
    }
}

/// The pods settings, and where `replicas` is written if it is (autoscale
/// warns that it is ignored).
pub(crate) fn pods(ctx: &mut Ctx<'_>, q: &Object<'_>) -> (Option<Pods>, Option<At>) {
    let p = q.child(ctx, "pods", &PODS);
    let replicas_at = p.get("replicas").map(Item::value);
    (pods_settings(ctx, &p), replicas_at)
}

fn pods_settings(ctx: &mut Ctx<'_>, p: &Object<'_>) -> Option<Pods> {
    let replicas = p
        .count(
            ctx,
            "replicas",
            "run 1 to 1000 worker pods; use autoscale with min: 0 to scale to zero",
        )
        .or(2);
    let cpu_request = p.read(ctx, "cpu", cpu).or(("100m".to_owned(), 100));
    let memory_request = p
        .read(ctx, "memory", memory)
        .or(("128Mi".to_owned(), 128 << 20));
    let cpu_limit = p.read(ctx, "cpu_limit", cpu).optional();
    let memory_limit = p.read(ctx, "memory_limit", memory);
    let (cpu, memory) = (cpu_request, memory_request);
    let memory_limit_given = memory_limit.is_present();
    let memory_limit = match (memory_limit, &memory) {
        (Read::Absent, Some(request)) => Some(request.clone()),
        (other, _) => other.optional().flatten(),
    };
    let mut ok = true;
    if let (Some(Some((limit, limit_m))), Some((request, request_m))) = (&cpu_limit, &cpu) {
        if limit_m < request_m {
            ok = ctx.fail(
                &p.at("cpu_limit"),
                format!("cpu_limit {limit} is below the cpu request {request}: Kubernetes refuses the pod"),
                format!("raise cpu_limit to at least {request}, or leave it out (no CPU throttling)"),
            );
        }
    }
    if let (true, Some((limit, limit_b)), Some((request, request_b))) =
        (memory_limit_given, &memory_limit, &memory)
    {
        if limit_b < request_b {
            ok = ctx.fail(
                &p.at("memory_limit"),
                format!("memory_limit {limit} is below the memory request {request}: Kubernetes refuses the pod"),
                format!("raise memory_limit to at least {request}, or leave it out to use the request"),
            );
        }
    }
    if !ok {
        return None;
    }
    Some(Pods {
        replicas: replicas? as u32,
        cpu: cpu?.0,
        memory: memory?.0,
        cpu_limit: cpu_limit?.map(|(text, _)| text),
        memory_limit: memory_limit?.0,
    })
}

/// `None` when invalid; `Some(None)` when the queue does not autoscale.
pub(crate) fn autoscale(
    ctx: &mut Ctx<'_>,
    q: &Object<'_>,
    replicas_at: Option<&At>,
) -> Option<Option<Autoscale>> {
    if q.get("autoscale").is_none() {
        return Some(None);
    }
    let a = q.child(ctx, "autoscale", &AUTOSCALE);
    let min = a
        .count(ctx, "min", "min is 0 (scale to zero) to 1000")
        .or(1);
    let max = a
        .count(ctx, "max", "max is 1 to 1000 worker pods")
        .optional()
        .flatten();
    let oldest_ready_age = a.read(ctx, "oldest_ready_age", values::duration).optional();
    let lag = a
        .count(
            ctx,
            "lag",
            "lag is the entries not yet read that one replica should face, at least 1",
        )
        .optional();
    let (min, max, oldest_ready_age, lag) = (min?, max?, oldest_ready_age?, lag?);
    if oldest_ready_age.is_none() && lag.is_none() {
        return ctx.refuse(
            &a.anchor(),
            "autoscale has no target: set oldest_ready_age, lag or both",
            "e.g. `autoscale: { min: 1, max: 10, oldest_ready_age: 30s, lag: 100 }`",
        );
    }
    if max < min {
        return ctx.refuse(
            &a.at("max"),
            format!("max {max} is below min {min}"),
            format!("raise max to at least {min}, or lower min"),
        );
    }
    if min == 0 && lag.is_none() {
        return ctx.refuse(
            &a.at("min"),
            "min 0 scales to zero, and then only the lag trigger, which KEDA reads from Redis itself, is sure to wake the queue: the age trigger goes through the monitor and Prometheus, and while either is down, jobs would wait with no worker at all",
            "add `lag: N` (entries not yet read per replica), or set min to 1",
        );
    }
    if let Some(at) = replicas_at {
        ctx.warning(
            at,
            "pods.replicas is ignored: with autoscale, KEDA sets the replica count",
            "remove pods.replicas, or remove autoscale",
        );
    }
    Some(Some(Autoscale {
        min: min as u32,
        max: max as u32,
        oldest_ready_age,
        lag,
    }))
}

fn token(ctx: &mut Ctx<'_>, item: &Item<'_>) -> Option<String> {
    let text = values::string(ctx, item)?;
    if text.is_empty() || text.chars().any(char::is_whitespace) {
        return ctx.refuse(
            &item.value(),
            format!("`{text}` is empty or contains whitespace"),
            "write it without spaces, e.g. registry.example.com/docs-pipeline-worker:1.4.2",
        );
    }
    Some(text.to_owned())
}

fn dns_label(ctx: &mut Ctx<'_>, item: &Item<'_>, what: &str) -> Option<String> {
    let text = values::string(ctx, item)?;
    if is_dns_label(text) {
        return Some(text.to_owned());
    }
    ctx.refuse(
        &item.value(),
        format!("`{text}` is not a valid Kubernetes {what}"),
        "use at most 63 lowercase letters, digits and `-`, starting and ending with a letter or digit",
    )
}

fn is_dns_label(text: &str) -> bool {
    let bytes = text.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-'
}

/// A CPU quantity as written, with its value in millicores.
fn cpu(ctx: &mut Ctx<'_>, item: &Item<'_>) -> Option<(String, u64)> {
    let text = values::string(ctx, item)?;
    match parse_cpu(text) {
        Some(m) if m > 0 => Some((text.to_owned(), m)),
        _ => ctx.refuse(
            &item.value(),
            format!("`{text}` is not a CPU quantity"),
            "write millicores such as 250m, or cores in quotes such as \"0.5\" or \"2\"",
        ),
    }
}

/// A memory quantity as written, with its value in bytes.
fn memory(ctx: &mut Ctx<'_>, item: &Item<'_>) -> Option<(String, u64)> {
    let text = values::string(ctx, item)?;
    match parse_memory(text) {
        Some(b) if b > 0 => Some((text.to_owned(), b)),
        _ => ctx.refuse(
            &item.value(),
            format!("`{text}` is not a memory quantity"),
            "write a whole number of bytes with Ki, Mi, Gi or Ti, e.g. 256Mi or 1Gi",
        ),
    }
}

/// `250m` -> 250; `0.5` -> 500; `2` -> 2000. At most three decimals, the
/// precision Kubernetes keeps for CPU.
pub(crate) fn parse_cpu(text: &str) -> Option<u64> {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if let Some(milli) = text.strip_suffix('m') {
        return digits(milli).then(|| milli.parse().ok()).flatten();
    }
    let (whole, fraction) = match text.split_once('.') {
        Some((whole, fraction)) if digits(fraction) => (whole, fraction),
        Some(_) => return None,
        None => (text, ""),
    };
    if !digits(whole) || fraction.len() > 3 {
        return None;
    }
    let whole: u64 = whole.parse().ok()?;
    let fraction: u64 = format!("{fraction:0<3}").parse().ok()?;
    whole.checked_mul(1000)?.checked_add(fraction)
}

/// `256Mi` -> 268435456; `1000` -> 1000.
pub(crate) fn parse_memory(text: &str) -> Option<u64> {
    let (number, shift) = [("Ki", 10), ("Mi", 20), ("Gi", 30), ("Ti", 40)]
        .iter()
        .find_map(|(suffix, shift)| text.strip_suffix(suffix).map(|n| (n, *shift)))
        .unwrap_or((text, 0));
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    number.parse::<u64>().ok()?.checked_mul(1 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_quantities() {
        assert_eq!(parse_cpu("250m"), Some(250));
        assert_eq!(parse_cpu("0.5"), Some(500));
        assert_eq!(parse_cpu("2"), Some(2000));
        assert_eq!(parse_cpu("1.25"), Some(1250));
        for bad in ["", "m", "1.2345", "-1", "1e3", "0.5m", "one", "1."] {
            assert_eq!(parse_cpu(bad), None, "{bad}");
        }
    }

    #[test]
    fn memory_quantities() {
        assert_eq!(parse_memory("256Mi"), Some(256 << 20));
        assert_eq!(parse_memory("1Gi"), Some(1 << 30));
        assert_eq!(parse_memory("1000"), Some(1000));
        for bad in ["", "Mi", "1.5Gi", "256MB", "-1Mi", "1 Gi"] {
            assert_eq!(parse_memory(bad), None, "{bad}");
        }
    }

    #[test]
    fn dns_labels() {
        assert!(is_dns_label("docs-pipeline"));
        assert!(is_dns_label("a1"));
        for bad in ["", "-a", "a-", "A", "a_b", "a.b", &"a".repeat(64)] {
            assert!(!is_dns_label(bad), "{bad}");
        }
    }
}
