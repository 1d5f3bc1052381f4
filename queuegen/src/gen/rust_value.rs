//! Runtime values as Rust expressions, for the consts of generated code: the
//! generator renders the very `QueueConfig` that [`super::runtime_config`]
//! builds for the CLI, so the spec -> settings mapping has one home.

use std::time::Duration;

use proc_macro2::{Literal, TokenStream};
use std::borrow::Cow;

use queuegen_runtime::config::{
    AdmissionConfig, Backoff, ClaimConfig, DeadLetterConfig, DedupConfig, DurabilityConfig,
    HandlerConfig, PayloadConfig, PoisonConfig, RetentionConfig, RetryConfig,
};
use queuegen_runtime::{Jitter, Lane, QueueConfig, RateLimit, TenantRateLimit};
use quote::{format_ident, quote};

/// A value that generated code can spell as a Rust expression.
pub trait RustValue {
    fn rust(&self) -> TokenStream;
}

/// `value` as Rust source text (unformatted: the file goes through
/// `layout::format`).
pub fn source(value: &impl RustValue) -> String {
    value.rust().to_string()
}

impl RustValue for QueueConfig {
    fn rust(&self) -> TokenStream {
        // Destructured without `..`: a new setting does not compile until it is rendered.
        let QueueConfig {
            service,
            key_prefix,
            queue,
            partitions,
            partition_by,
            group,
            group_start,
            functions,
            handler,
            claim,
            payload,
            retry,
            poison,
            dead_letter,
            retention,
            admission,
            redis,
            dedup,
            lanes,
            default_lane,
        } = self;
        let fields = [
            ("service", service.rust()),
            ("key_prefix", key_prefix.rust()),
            ("queue", queue.rust()),
            ("partitions", partitions.rust()),
            ("partition_by", partition_by.rust()),
            ("group", group.rust()),
            ("group_start", group_start.rust()),
            ("functions", functions.rust()),
            ("handler", handler.rust()),
            ("claim", claim.rust()),
            ("payload", payload.rust()),
            ("retry", retry.rust()),
            ("poison", poison.rust()),
            ("dead_letter", dead_letter.rust()),
            ("retention", retention.rust()),
            ("admission", admission.rust()),
            ("redis", redis.rust()),
            ("dedup", dedup.rust()),
            ("lanes", lanes.rust()),
            ("default_lane", default_lane.rust()),
        ];
        struct_literal("QueueConfig", &fields)
    }
}

/// `Name { field: value, .. }` from the rendered fields, in order.
fn struct_literal(name: &str, fields: &[(&str, TokenStream)]) -> TokenStream {
    let name = format_ident!("{name}");
    let names = fields.iter().map(|(field, _)| format_ident!("{field}"));
    let values = fields.iter().map(|(_, value)| value);
    quote!(#name { #(#names: #values),* })
}

impl RustValue for HandlerConfig {
    fn rust(&self) -> TokenStream {
        let HandlerConfig {
            timeout,
            concurrency,
            shutdown_budget,
            rate,
            tenant_rate,
        } = self;
        struct_literal(
            "HandlerConfig",
            &[
                ("timeout", timeout.rust()),
                ("concurrency", concurrency.rust()),
                ("shutdown_budget", shutdown_budget.rust()),
                ("rate", rate.rust()),
                ("tenant_rate", tenant_rate.rust()),
            ],
        )
    }
}

impl RustValue for ClaimConfig {
    fn rust(&self) -> TokenStream {
        let ClaimConfig {
            min_idle,
            every,
            batch,
            rate,
        } = self;
        struct_literal(
            "ClaimConfig",
            &[
                ("min_idle", min_idle.rust()),
                ("every", every.rust()),
                ("batch", batch.rust()),
                ("rate", rate.rust()),
            ],
        )
    }
}

impl RustValue for PayloadConfig {
    fn rust(&self) -> TokenStream {
        let PayloadConfig { max_bytes } = self;
        struct_literal("PayloadConfig", &[("max_bytes", max_bytes.rust())])
    }
}

impl RustValue for RetryConfig {
    fn rust(&self) -> TokenStream {
        let RetryConfig {
            max_attempts,
            backoff,
            promote_every,
            promote_batch,
        } = self;
        struct_literal(
            "RetryConfig",
            &[
                ("max_attempts", max_attempts.rust()),
                ("backoff", backoff.rust()),
                ("promote_every", promote_every.rust()),
                ("promote_batch", promote_batch.rust()),
            ],
        )
    }
}

impl RustValue for Backoff {
    fn rust(&self) -> TokenStream {
        let Backoff {
            initial,
            max,
            factor,
            jitter,
        } = self;
        struct_literal(
            "Backoff",
            &[
                ("initial", initial.rust()),
                ("max", max.rust()),
                ("factor", factor.rust()),
                ("jitter", jitter.rust()),
            ],
        )
    }
}

impl RustValue for PoisonConfig {
    fn rust(&self) -> TokenStream {
        let PoisonConfig { max_deliveries } = self;
        struct_literal("PoisonConfig", &[("max_deliveries", max_deliveries.rust())])
    }
}

impl RustValue for DeadLetterConfig {
    fn rust(&self) -> TokenStream {
        let DeadLetterConfig { max_len, retention } = self;
        struct_literal(
            "DeadLetterConfig",
            &[("max_len", max_len.rust()), ("retention", retention.rust())],
        )
    }
}

impl RustValue for RetentionConfig {
    fn rust(&self) -> TokenStream {
        let RetentionConfig {
            min_age,
            marker_ttl,
            trim_every,
            trim_in_process,
            delete_on_ack,
        } = self;
        struct_literal(
            "RetentionConfig",
            &[
                ("min_age", min_age.rust()),
                ("marker_ttl", marker_ttl.rust()),
                ("trim_every", trim_every.rust()),
                ("trim_in_process", trim_in_process.rust()),
                ("delete_on_ack", delete_on_ack.rust()),
            ],
        )
    }
}

impl RustValue for AdmissionConfig {
    fn rust(&self) -> TokenStream {
        let AdmissionConfig {
            max_oldest_ready_age,
            refresh,
        } = self;
        struct_literal(
            "AdmissionConfig",
            &[
                ("max_oldest_ready_age", max_oldest_ready_age.rust()),
                ("refresh", refresh.rust()),
            ],
        )
    }
}

impl RustValue for DurabilityConfig {
    fn rust(&self) -> TokenStream {
        let DurabilityConfig {
            wait_replicas,
            wait_timeout,
        } = self;
        struct_literal(
            "DurabilityConfig",
            &[
                ("wait_replicas", wait_replicas.rust()),
                ("wait_timeout", wait_timeout.rust()),
            ],
        )
    }
}

impl RustValue for DedupConfig {
    fn rust(&self) -> TokenStream {
        let DedupConfig { window } = self;
        struct_literal("DedupConfig", &[("window", window.rust())])
    }
}

impl RustValue for Lane {
    fn rust(&self) -> TokenStream {
        let Lane { name, weight } = self;
        let (name, weight) = (name.rust(), weight.rust());
        quote!(Lane { name: #name, weight: #weight })
    }
}

impl RustValue for RateLimit {
    fn rust(&self) -> TokenStream {
        let RateLimit { limit, per } = self;
        let (limit, per) = (limit.rust(), per.rust());
        quote!(queuegen_runtime::RateLimit { limit: #limit, per: #per })
    }
}

impl RustValue for TenantRateLimit {
    fn rust(&self) -> TokenStream {
        let TenantRateLimit {
            limit,
            per,
            classes,
        } = self;
        let (limit, per, classes) = (limit.rust(), per.rust(), classes.rust());
        quote!(queuegen_runtime::TenantRateLimit { limit: #limit, per: #per, classes: #classes })
    }
}

impl RustValue for Jitter {
    fn rust(&self) -> TokenStream {
        match self {
            Jitter::None => quote!(Jitter::None),
            Jitter::Full => quote!(Jitter::Full),
        }
    }
}

impl RustValue for Duration {
    /// The shortest exact constructor.
    fn rust(&self) -> TokenStream {
        if self.subsec_nanos() == 0 {
            let secs = self.as_secs().rust();
            quote!(Duration::from_secs(#secs))
        } else {
            let millis = Literal::u128_unsuffixed(self.as_millis());
            quote!(Duration::from_millis(#millis))
        }
    }
}

impl<T: RustValue> RustValue for Option<T> {
    fn rust(&self) -> TokenStream {
        match self {
            None => quote!(None),
            Some(value) => {
                let value = value.rust();
                quote!(Some(#value))
            }
        }
    }
}

/// A slice literal.
impl<T: RustValue> RustValue for &[T] {
    fn rust(&self) -> TokenStream {
        let items = self.iter().map(RustValue::rust);
        quote!(&[#(#items),*])
    }
}

impl RustValue for &str {
    fn rust(&self) -> TokenStream {
        let literal = Literal::string(self);
        quote!(#literal)
    }
}

/// A `Cow<'static, str>` field: a borrowed literal, so the value stays a `const`.
impl RustValue for Cow<'static, str> {
    fn rust(&self) -> TokenStream {
        let literal = self.as_ref().rust();
        quote!(Cow::Borrowed(#literal))
    }
}

/// A `Cow<'static, [T]>` field: a borrowed slice literal.
impl<T: RustValue + Clone> RustValue for Cow<'static, [T]> {
    fn rust(&self) -> TokenStream {
        let slice = self.as_ref().rust();
        quote!(Cow::Borrowed(#slice))
    }
}

impl RustValue for bool {
    fn rust(&self) -> TokenStream {
        if *self {
            quote!(true)
        } else {
            quote!(false)
        }
    }
}

impl RustValue for f64 {
    /// Always with a decimal point or exponent, so it stays an `f64`.
    fn rust(&self) -> TokenStream {
        let literal = Literal::f64_unsuffixed(*self);
        quote!(#literal)
    }
}

macro_rules! unsuffixed_integers {
    ($($ty:ty => $literal:ident),*) => {$(
        impl RustValue for $ty {
            fn rust(&self) -> TokenStream {
                let literal = Literal::$literal(*self);
                quote!(#literal)
            }
        }
    )*};
}

unsuffixed_integers!(
    u16 => u16_unsuffixed,
    u32 => u32_unsuffixed,
    u64 => u64_unsuffixed,
    usize => usize_unsuffixed
);

#[cfg(test)]
mod tests {
    use super::*;

    fn text(value: &impl RustValue) -> String {
        source(value).replace(' ', "")
    }

    #[test]
    fn durations_use_the_shortest_exact_constructor() {
        assert_eq!(text(&Duration::from_secs(60)), "Duration::from_secs(60)");
        assert_eq!(
            text(&Duration::from_millis(1500)),
            "Duration::from_millis(1500)"
        );
    }

    #[test]
    fn floats_stay_floats_and_strings_are_escaped() {
        assert_eq!(text(&2.0_f64), "2.0");
        assert_eq!(text(&1.5_f64), "1.5");
        assert_eq!(source(&"a\"b"), r#""a\"b""#);
    }

    #[test]
    fn options_slices_and_lanes() {
        let lanes: &[Lane] = &[Lane {
            name: Cow::Borrowed("high"),
            weight: 3,
        }];
        assert_eq!(
            text(&lanes),
            r#"&[Lane{name:Cow::Borrowed("high"),weight:3}]"#
        );
        assert_eq!(text(&None::<Duration>), "None");
        let empty: &[&str] = &[];
        assert_eq!(text(&empty), "&[]");
    }
}
