//! A pipeline run's identity: the IDs of the jobs a stage hands on, derived so that a job delivered again hands on the same ones.
//!
//! A child's `job_id` depends only on the run, the parent's `job_id`, the
//! stage it is handed to and its index among the jobs the parent hands to
//! that stage. A parent delivered again (after a crash, a claim) therefore
//! hands on the same IDs, and the stage's `dedup` absorbs the repeat. The
//! derivation is part of the wire contract: a change would make the jobs a
//! redelivered parent hands on during a rolling deploy look new, so the
//! unit tests pin fixed vectors.

use queuegen_core::wire::{header_fields, HEADER_FIELDS};
use xxhash_rust::xxh3::xxh3_128;

/// Separates the hashed parts, as the partition hash does, so that
/// `("ab", "c")` and `("a", "bc")` differ.
const SEPARATOR: u8 = 0x1f;

/// The longest `job_id` the header allows for (the payload allowance).
fn max_job_id_bytes() -> usize {
    HEADER_FIELDS
        .iter()
        .find(|h| h.name == header_fields::JOB_ID)
        .and_then(|h| h.max_value_bytes)
        .expect("job_id has a size allowance") as usize
}

/// The `job_id` of the `index`th job (from 0) that `parent_job_id`, a job
/// of run `run_id`, hands to `stage`.
///
/// `<run_id>/<stage>/<32 hex digits>`, the digits XXH3-128 of the parent,
/// the stage and the index. When that is longer than a `job_id` may be, the
/// run ID is replaced by its own 32-digit hash, and when that is still too
/// long (a very long stage name), the stage is left out. Two jobs of a run
/// share an ID only if 128-bit hashes collide.
pub fn child_job_id(run_id: &str, parent_job_id: &str, stage: &str, index: u32) -> String {
    let index = index.to_string();
    let digits = hex(hash(&[parent_job_id, stage, &index]));
    let max = max_job_id_bytes();
    let full = format!("{run_id}/{stage}/{digits}");
    if full.len() <= max {
        return full;
    }
    let run = hex(hash(&[run_id]));
    let shortened = format!("{run}/{stage}/{digits}");
    if shortened.len() <= max {
        return shortened;
    }
    format!("{run}/{digits}")
}

/// The `job_id` of `join`'s job in run `run_id`: `<run_id>/<join>`, or
/// the run ID's 32-digit hash in its place when that is too long. A first
/// stage's job counts on it, from the start, at every join after `join`.
pub fn join_job_id(run_id: &str, join: &str) -> String {
    let full = format!("{run_id}/{join}");
    if full.len() <= max_job_id_bytes() {
        return full;
    }
    format!("{}/{join}", hex(hash(&[run_id])))
}

fn hash(parts: &[&str]) -> u128 {
    let mut bytes = Vec::with_capacity(parts.iter().map(|p| p.len() + 1).sum());
    for part in parts {
        bytes.extend_from_slice(part.as_bytes());
        bytes.push(SEPARATOR);
    }
    xxh3_128(&bytes)
}

fn hex(value: u128) -> String {
    format!("{value:032x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_join_job_is_named_by_its_run_and_join() {
        assert_eq!(join_job_id("doc-1", "notify"), "doc-1/notify");
        let long = "r".repeat(128);
        let id = join_job_id(&long, "notify");
        assert_eq!(id.len(), 32 + "/notify".len());
        assert!(id.ends_with("/notify"));
    }

    /// Fixed vectors: the derivation is part of the wire contract. The
    /// hash is XXH3-128 as specified (its published value for no input),
    /// so another implementation can derive the same IDs.
    #[test]
    fn derived_ids_are_pinned() {
        assert_eq!(xxh3_128(b""), 0x99aa_06d3_0147_98d8_6001_c324_468d_497f);
        assert_eq!(
            child_job_id("doc-1", "doc-1", "index", 0),
            "doc-1/index/d2b1d4bef5f437ad6996e9186e8f1156"
        );
        assert_eq!(
            child_job_id("doc-1", "doc-1/index/x", "thumbnail", 7),
            "doc-1/thumbnail/58a92a60ed40bbd09e1427e0f8177bf4"
        );
    }

    #[test]
    fn a_parent_hands_on_the_same_ids_and_different_positions_differ() {
        let once = child_job_id("r", "p", "s", 0);
        assert_eq!(once, child_job_id("r", "p", "s", 0));
        let others = [
            child_job_id("r", "p", "s", 1),
            child_job_id("r", "p", "t", 0),
            child_job_id("r", "q", "s", 0),
            // The separator keeps the parts apart.
            child_job_id("r", "p", "s0", 0),
        ];
        for other in &others {
            assert_ne!(&once, other);
        }
        assert_ne!(
            child_job_id("r", "ps", "", 0),
            child_job_id("r", "p", "s", 0)
        );
    }

    #[test]
    fn an_id_stays_within_the_job_id_allowance() {
        let long_run = "r".repeat(128);
        let long_stage = "s".repeat(100);
        for (run, stage) in [
            ("r", "s"),
            (long_run.as_str(), "s"),
            (long_run.as_str(), long_stage.as_str()),
            ("r", long_stage.as_str()),
        ] {
            let id = child_job_id(run, "parent", stage, 3);
            assert!(id.len() <= 128, "{id}");
            assert_eq!(id, child_job_id(run, "parent", stage, 3));
        }
        let shortened = child_job_id(&long_run, "parent", "s", 0);
        assert!(shortened.ends_with(&format!("/s/{}", hex(hash(&["parent", "s", "0"])))));
        let bare = child_job_id(&long_run, "parent", &long_stage, 0);
        assert_eq!(bare.split('/').count(), 2, "{bare}");
    }
}
