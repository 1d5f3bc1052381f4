//! What one run of a scenario found: the numbers of the table's row, and every problem that fails it.

/// The outcome of one scenario run on one target.
#[derive(Debug, Clone, Default)]
pub struct Verdict {
    /// Jobs published.
    pub jobs: u64,
    /// Jobs published and never durably done (nor dead-lettered where their
    /// script sends them); `None` until the scenario got as far as counting.
    pub lost: Option<u64>,
    /// Jobs the scenario itself makes an outsider destroy: lost, and reported.
    pub expected_lost: u64,
    /// Effects applied again after (or alongside) an earlier application;
    /// `None` until counted.
    pub duplicates: Option<u64>,
    /// What the scenario saw that shows it exercised its path (a short note for the table).
    pub notes: Vec<String>,
    /// Each broken expectation; any one fails the row.
    pub problems: Vec<String>,
}

impl Verdict {
    pub fn new(jobs: usize) -> Verdict {
        Verdict {
            jobs: jobs as u64,
            ..Verdict::default()
        }
    }

    /// Adds counted lost jobs and duplicate effects.
    pub fn count(&mut self, lost: u64, duplicates: u64) {
        self.lost = Some(self.lost.unwrap_or(0) + lost);
        self.duplicates = Some(self.duplicates.unwrap_or(0) + duplicates);
    }

    /// Records `problem()` unless `holds`.
    pub fn check(&mut self, holds: bool, problem: impl FnOnce() -> String) {
        if !holds {
            self.problems.push(problem());
        }
    }

    pub fn problem(&mut self, problem: impl Into<String>) {
        self.problems.push(problem.into());
    }

    pub fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }

    /// Passed: counted, nothing lost beyond what the scenario destroys on
    /// purpose, no duplicate effect, no broken expectation.
    pub fn passed(&self) -> bool {
        self.lost == Some(self.expected_lost)
            && self.duplicates == Some(0)
            && self.problems.is_empty()
    }
}
