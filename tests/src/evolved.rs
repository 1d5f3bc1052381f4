//! The hand-written step of `EvolvedJob` (`changes.3.upcast: manual` in tests/queues.yaml).

use crate::queues::envelopes::{EvolvedJob, EvolvedJobV2};

/// Schema 3 renamed `pages` to `page_count`, and counts a document of no
/// pages as one: what a team writes when a conversion needs a rule.
impl From<EvolvedJobV2> for EvolvedJob {
    fn from(v2: EvolvedJobV2) -> Self {
        EvolvedJob {
            subject_ref: v2.subject_ref,
            page_count: v2.pages.max(1),
            mode: v2.mode,
        }
    }
}
