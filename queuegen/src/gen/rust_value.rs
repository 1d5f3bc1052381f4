//! Runtime values as Rust expressions, for the consts of generated code: the
//! generator renders the very `QueueConfig` that [`super::runtime_config`]
//! builds for the CLI, so the spec -> settings mapping has one home.

use std::time::Duration;

use proc_macro2::{Literal, TokenStream};
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
            handler_timeout,
            concurrency,
            shutdown_budget,
            rate,
            tenant_rate,
            claim_min_idle,
            claim_every,
            claim_batch,
            claim_rate,
            payload_max_bytes,
            functions,
            retry_max_attempts,
            retry_initial,
            retry_max,
            retry_factor,
            retry_jitter,
            retry_promote_every,
            retry_promote_batch,
            poison_max_deliveries,
            dead_letter_max_len,
            marker_ttl,
            retention_min_age,
            trim_every,
            trim_in_process,
            delete_on_ack,
            dead_letter_retention,
            admission_max_oldest_ready_age,
            admission_refresh,
            wait_replicas,
            wait_timeout,
            dedup_window,
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
            ("handler_timeout", handler_timeout.rust()),
            ("concurrency", concurrency.rust()),
            ("shutdown_budget", shutdown_budget.rust()),
            ("rate", rate.rust()),
            ("tenant_rate", tenant_rate.rust()),
            ("claim_min_idle", claim_min_idle.rust()),
            ("claim_every", claim_every.rust()),
            ("claim_batch", claim_batch.rust()),
            ("claim_rate", claim_rate.rust()),
            ("payload_max_bytes", payload_max_bytes.rust()),
            ("functions", functions.rust()),
            ("retry_max_attempts", retry_max_attempts.rust()),
            ("retry_initial", retry_initial.rust()),
            ("retry_max", retry_max.rust()),
            ("retry_factor", retry_factor.rust()),
            ("retry_jitter", retry_jitter.rust()),
            ("retry_promote_every", retry_promote_every.rust()),
            ("retry_promote_batch", retry_promote_batch.rust()),
            ("poison_max_deliveries", poison_max_deliveries.rust()),
            ("dead_letter_max_len", dead_letter_max_len.rust()),
            ("marker_ttl", marker_ttl.rust()),
            ("retention_min_age", retention_min_age.rust()),
            ("trim_every", trim_every.rust()),
            ("trim_in_process", trim_in_process.rust()),
            ("delete_on_ack", delete_on_ack.rust()),
            ("dead_letter_retention", dead_letter_retention.rust()),
            (
                "admission_max_oldest_ready_age",
                admission_max_oldest_ready_age.rust(),
            ),
            ("admission_refresh", admission_refresh.rust()),
            ("wait_replicas", wait_replicas.rust()),
            ("wait_timeout", wait_timeout.rust()),
            ("dedup_window", dedup_window.rust()),
            ("lanes", lanes.rust()),
            ("default_lane", default_lane.rust()),
        ];
        let names = fields.iter().map(|(name, _)| format_ident!("{name}"));
        let values = fields.iter().map(|(_, value)| value);
        quote!(QueueConfig { #(#names: #values),* })
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

/// A `&'static [T]` field: a slice literal.
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
            name: "high",
            weight: 3,
        }];
        assert_eq!(text(&lanes), r#"&[Lane{name:"high",weight:3}]"#);
        assert_eq!(text(&None::<Duration>), "None");
        let empty: &[&str] = &[];
        assert_eq!(text(&empty), "&[]");
    }
}
