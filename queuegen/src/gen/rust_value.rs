//! Runtime values as Rust expressions, for the consts of generated code: the
//! generator renders the very `QueueConfig` that [`super::runtime_config`]
//! builds for the CLI, so the spec -> settings mapping has one home.

use std::time::Duration;

use proc_macro2::{Literal, TokenStream};
use std::borrow::Cow;

use queuegen_runtime::config::{
    AdmissionConfig, Backoff, ClaimConfig, DeadLetterConfig, DedupConfig, DurabilityConfig,
    EntryShape, HandlerConfig, PayloadConfig, PoisonConfig, RetentionConfig, RetryConfig,
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

/// `impl RustValue` for config structs, each rendered as a struct literal of
/// all its fields. A function cannot do this: the pattern names every field
/// without `..`, so a new setting does not compile until it is listed here.
macro_rules! struct_values {
    ($($name:ident { $($field:ident),* })*) => {$(
        impl RustValue for $name {
            fn rust(&self) -> TokenStream {
                let $name { $($field),* } = self;
                let fields = [$((stringify!($field), $field.rust())),*];
                struct_literal(stringify!($name), &fields)
            }
        }
    )*};
}

struct_values! {
    QueueConfig {
        service, key_prefix, queue, partitions, partition_by, group, group_start,
        prune_consumers_after, functions,
        handler, claim, payload, retry, poison, dead_letter, retention, admission, redis, dedup,
        lanes, default_lane
    }
    HandlerConfig { timeout, concurrency, shutdown_budget, rate, tenant_rate }
    ClaimConfig { min_idle, every, batch, rate }
    PayloadConfig { max_bytes, shape }
    RetryConfig { max_attempts, backoff, promote_every, promote_batch }
    Backoff { initial, max, factor, jitter }
    PoisonConfig { max_deliveries }
    DeadLetterConfig { max_len, retention }
    RetentionConfig { min_age, marker_ttl, trim_every, trim_in_process, delete_on_ack }
    AdmissionConfig { max_oldest_ready_age, refresh }
    DurabilityConfig { wait_replicas, wait_timeout }
    DedupConfig { window }
    Lane { name, weight }
}

/// `Name { field: value, .. }` from the rendered fields, in order.
fn struct_literal(name: &str, fields: &[(&str, TokenStream)]) -> TokenStream {
    let name = format_ident!("{name}");
    let names = fields.iter().map(|(field, _)| format_ident!("{field}"));
    let values = fields.iter().map(|(_, value)| value);
    quote!(#name { #(#names: #values),* })
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

impl RustValue for EntryShape {
    fn rust(&self) -> TokenStream {
        match self {
            EntryShape::Packed => quote!(EntryShape::Packed),
            EntryShape::Fields => quote!(EntryShape::Fields),
        }
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
