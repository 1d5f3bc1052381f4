//! Per-tenant rate limits (`handler.tenant_rate`): each read's entries are admitted by their tenant class's token bucket, one pipeline per read.
//!
//! The tenant is known only once an entry is read, so the queue-wide
//! limiter's trick (read no more than granted) does not work per tenant.
//! Instead, after a read, the entries are counted per tenant class and one
//! pipeline asks each class's bucket (the library's `rate_take`, the same
//! bucket as `handler.rate`'s, keyed per class) for that many tokens. The
//! first entries of a class, in read order, up to its grant, start; the
//! others are set aside with the library's `defer`: into the retry set with
//! their attempt kept, due when their class's bucket will have refilled a
//! token for each (the k-th excess entry k × per / limit from now, after the
//! bucket's own wait). A deferred job holds no handler permit while it
//! waits and is not failed; it is promoted back like a retry and read again.
//!
//! Should the buckets not answer, the read's entries start unlimited (and a
//! warning says so): they are already delivered to this worker, and holding
//! them would stall them until recovery. Entries recovery claims, and due
//! retries of failed jobs, are not limited here (as with `handler.rate`).

use std::collections::BTreeMap;

use super::reply::Entry;
use crate::config::QueueConfig;
use crate::connect::Connection;
use crate::envelope::header_fields;
use crate::host::now_ms;
use crate::partition::tenant_class;

/// One worker's gate; `None` without `handler.tenant_rate`.
pub(super) struct TenantGate {
    function: String,
    limit: u32,
    per_ms: u64,
    classes: u16,
    keys: Vec<String>,
}

impl TenantGate {
    pub(super) fn new(config: &QueueConfig) -> Option<TenantGate> {
        let rate = config.handler.tenant_rate?;
        Some(TenantGate {
            function: config.function(crate::functions::Function::RateTake),
            limit: rate.limit,
            per_ms: u64::try_from(rate.per.as_millis())
                .unwrap_or(u64::MAX)
                .max(1),
            classes: rate.classes.max(1),
            keys: (0..rate.classes.max(1))
                .map(|class| config.tenant_rate_key(class))
                .collect(),
        })
    }

    /// For each of `entries`, in order: `None` to start it now, or
    /// `Some(due_ms)` to set it aside until then (Unix ms).
    pub(super) async fn admit(
        &self,
        conn: &mut Connection,
        entries: &[&Entry],
    ) -> Vec<Option<u64>> {
        let classes: Vec<u16> = entries
            .iter()
            .map(|entry| tenant_class(&tenant_of(entry), self.classes))
            .collect();
        let mut wanted: BTreeMap<u16, usize> = BTreeMap::new();
        for &class in &classes {
            *wanted.entry(class).or_default() += 1;
        }
        let mut pipe = redis::pipe();
        for (&class, &count) in &wanted {
            let take = crate::functions::RateTake {
                bucket_key: &self.keys[usize::from(class)],
                limit: self.limit,
                per_ms: self.per_ms,
                wanted: count,
                carry: 0,
            };
            crate::functions::pipe_command(&mut pipe, &self.function, &take);
        }
        let grants: Vec<(u64, u64)> = match pipe.query_async(&mut conn.clone()).await {
            Ok(grants) => grants,
            Err(err) => {
                tracing::warn!(error = %err, entries = entries.len(), "the tenant buckets did not answer; starting the read's entries unlimited");
                return vec![None; entries.len()];
            }
        };
        let now = now_ms();
        // Per class: (tokens left to hand out, excess entries so far, the bucket's wait).
        let mut left: BTreeMap<u16, (u64, u64, u64)> = wanted
            .keys()
            .zip(grants)
            .map(|(&class, (granted, wait_ms))| (class, (granted, 0, wait_ms)))
            .collect();
        classes
            .iter()
            .map(|class| {
                let (tokens, excess, wait_ms) = left.get_mut(class).expect("every class was asked");
                if *tokens > 0 {
                    *tokens -= 1;
                    return None;
                }
                *excess += 1;
                // The k-th excess entry waits for k more tokens at the refill rate.
                let refill = (*excess * self.per_ms).div_ceil(u64::from(self.limit.max(1)));
                Some(now + *wait_ms + refill)
            })
            .collect()
    }
}

/// The entry's `tenant` header as text (empty when missing: a class like any).
fn tenant_of(entry: &Entry) -> String {
    entry.field_text(header_fields::TENANT).unwrap_or_default()
}
