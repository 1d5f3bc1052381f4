//! Which partition a job goes to: a stable hash of its ordering key, independent of worker count.
//!
//! The hash is FNV-1a 64-bit over the values of `config.partition_by`, in the
//! order the spec lists them, each value's UTF-8 bytes followed by one 0x1F
//! (unit separator) byte, taken modulo `config.partitions`. The separator keeps
//! `("ab", "c")` and `("a", "bc")` apart. Changing any of this moves jobs of an
//! ordering key to another partition, so the unit tests pin fixed vectors.

use crate::config::QueueConfig;
use crate::envelope::header_fields;
use crate::stream_slot::Partition;

const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
const SEPARATOR: u8 = 0x1f;

/// The partition of a job, given its encoded fields (header and body pairs).
///
/// A `partition_by` field absent from `fields` (an optional field left out)
/// hashes as the empty value. A queue without `partition_by` has no ordering
/// key; its jobs are spread by `job_id` instead.
pub fn partition_of(config: &QueueConfig, fields: &[(&str, String)]) -> Partition {
    let value_of = |name: &str| {
        fields
            .iter()
            .find(|(field, _)| *field == name)
            .map_or("", |(_, value)| value.as_str())
    };
    let hash = if config.partition_by.is_empty() {
        fnv1a_values([value_of(header_fields::JOB_ID)])
    } else {
        fnv1a_values(config.partition_by.iter().map(|name| value_of(name)))
    };
    Partition::new((hash % u64::from(config.partitions.max(1))) as u16)
}

/// The partition of a join queue that keeps a pipeline run's state and
/// receives its join's job: the same FNV-1a hash of the run's ID, modulo
/// the partition count, so every job of the run finds it.
pub fn run_partition(config: &QueueConfig, run_id: &str) -> Partition {
    Partition::new((fnv1a_values([run_id]) % u64::from(config.partitions.max(1))) as u16)
}

/// The class of `tenant` among `classes` (`handler.tenant_rate`): the same
/// FNV-1a hash, modulo the class count.
pub fn tenant_class(tenant: &str, classes: u16) -> u16 {
    (fnv1a_values([tenant]) % u64::from(classes.max(1))) as u16
}

/// FNV-1a 64 over each value followed by the separator.
fn fnv1a_values<'a>(values: impl IntoIterator<Item = &'a str>) -> u64 {
    let mut hash = FNV_OFFSET_BASIS;
    for value in values {
        for &byte in value.as_bytes().iter().chain(&[SEPARATOR]) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(FNV_PRIME);
        }
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: QueueConfig = crate::config::tests::OCR;

    fn pairs<'a>(items: &[(&'a str, &str)]) -> Vec<(&'a str, String)> {
        items
            .iter()
            .map(|(name, value)| (*name, value.to_string()))
            .collect()
    }

    #[test]
    fn hash_matches_fixed_vectors() {
        // FNV-1a 64 of the bytes "\x1f", "a\x1f" and "acme\x1fdoc-1\x1f";
        // recomputable with any FNV-1a tool (FNV-1a 64 of "a" alone is the
        // published 0xaf63dc4c8601ec8c).
        assert_eq!(fnv1a_values([""]), 0xaf63_d24c_8601_db8e);
        assert_eq!(fnv1a_values(["a"]), 0x089b_e907_b544_fdc9);
        assert_eq!(fnv1a_values(["acme", "doc-1"]), 0xffb2_a854_f1de_e155);
    }

    #[test]
    fn partition_matches_fixed_vectors() {
        let job = |tenant: &str, subject: &str| {
            pairs(&[
                ("job_id", "j-1"),
                ("tenant", tenant),
                ("subject_ref", subject),
            ])
        };
        assert_eq!(
            partition_of(&CONFIG, &job("acme", "doc-1")),
            Partition::new(21)
        );
        assert_eq!(
            partition_of(&CONFIG, &job("acme", "doc-2")),
            Partition::new(26)
        );
        assert_eq!(
            partition_of(&CONFIG, &job("globex", "doc-1")),
            Partition::new(6)
        );
        let four = QueueConfig {
            partitions: 4,
            ..CONFIG
        };
        assert_eq!(
            partition_of(&four, &job("acme", "doc-1")),
            Partition::new(1)
        );
    }

    #[test]
    fn separator_keeps_value_boundaries() {
        assert_ne!(fnv1a_values(["ab", "c"]), fnv1a_values(["a", "bc"]));
    }

    #[test]
    fn only_partition_by_fields_count_in_their_order() {
        let a = pairs(&[("job_id", "1"), ("tenant", "t"), ("subject_ref", "s")]);
        let b = pairs(&[("subject_ref", "s"), ("job_id", "2"), ("tenant", "t")]);
        assert_eq!(partition_of(&CONFIG, &a), partition_of(&CONFIG, &b));
        assert_eq!(
            u64::from(partition_of(&CONFIG, &a).index()),
            fnv1a_values(["t", "s"]) % 32
        );
    }

    #[test]
    fn missing_field_hashes_as_empty_and_no_key_spreads_by_job_id() {
        let missing = pairs(&[("tenant", "t")]);
        assert_eq!(
            u64::from(partition_of(&CONFIG, &missing).index()),
            fnv1a_values(["t", ""]) % 32
        );
        let unordered = QueueConfig {
            partition_by: std::borrow::Cow::Borrowed(&[]),
            ..CONFIG
        };
        let job = pairs(&[("job_id", "j-7"), ("tenant", "t")]);
        assert_eq!(
            u64::from(partition_of(&unordered, &job).index()),
            fnv1a_values(["j-7"]) % 32
        );
    }
}
