//! What a library function answers beyond its own reply: where a move put a job (the refusal codes are `error::TransitionCode`).

/// Where a transition put the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    /// The destination: retry id, dead-letter ID or new ready entry ID.
    pub id: String,
    /// `true` when an earlier run had already made this transition (its
    /// marker was found): this call only finished cleanup.
    pub already: bool,
}
