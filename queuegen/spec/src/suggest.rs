//! Did-you-mean: the closest known name to a misspelt one.

/// Below this Jaro-Winkler similarity a candidate is not suggested; 0.8
/// catches transpositions and one or two wrong letters in short keys
/// without pairing unrelated words.
const THRESHOLD: f64 = 0.8;

/// The candidate closest to `word`, if any is close enough.
pub fn did_you_mean<'a, I>(word: &str, candidates: I) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    let word = word.to_lowercase();
    candidates
        .into_iter()
        .map(|candidate| {
            let score = strsim::jaro_winkler(&word, &candidate.to_lowercase());
            (score, candidate)
        })
        .filter(|(score, _)| *score >= THRESHOLD)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, candidate)| candidate)
}

/// `did you mean `x`?` or, with no close match, the list of valid choices.
pub fn help<'a, I>(word: &str, candidates: I, what: &str) -> String
where
    I: IntoIterator<Item = &'a str> + Clone,
{
    match did_you_mean(word, candidates.clone()) {
        Some(best) => format!("did you mean `{best}`?"),
        None => {
            let all: Vec<String> = candidates.into_iter().map(|c| format!("`{c}`")).collect();
            if all.is_empty() {
                format!("there are no {what} here")
            } else {
                format!("{what}: {}", all.join(", "))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLAIM: &[&str] = &["min_idle", "every", "batch", "rate"];
    const QUEUE: &[&str] = &[
        "envelope",
        "partitions",
        "partition_by",
        "group",
        "handler",
        "claim",
        "retry",
        "poison",
        "dead_letter",
        "retention",
        "payload",
        "admission",
        "alerts",
    ];

    #[test]
    fn finds_close_misspellings() {
        assert_eq!(
            did_you_mean("min_idel", CLAIM.iter().copied()),
            Some("min_idle")
        );
        assert_eq!(
            did_you_mean("batches", CLAIM.iter().copied()),
            Some("batch")
        );
        assert_eq!(
            did_you_mean("partitons", QUEUE.iter().copied()),
            Some("partitions")
        );
        assert_eq!(
            did_you_mean("partiton_by", QUEUE.iter().copied()),
            Some("partition_by")
        );
        assert_eq!(
            did_you_mean("deadletter", QUEUE.iter().copied()),
            Some("dead_letter")
        );
        assert_eq!(did_you_mean("Retry", QUEUE.iter().copied()), Some("retry"));
        assert_eq!(
            did_you_mean("OcrRequest", ["OcrRequested", "ExportRequested"]),
            Some("OcrRequested")
        );
    }

    #[test]
    fn stays_quiet_for_unrelated_words() {
        assert_eq!(did_you_mean("priority", CLAIM.iter().copied()), None);
        assert_eq!(did_you_mean("x", QUEUE.iter().copied()), None);
        assert_eq!(did_you_mean("anything", std::iter::empty()), None);
    }

    #[test]
    fn help_lists_choices_without_a_match() {
        assert_eq!(
            help("min_idel", CLAIM.iter().copied(), "valid keys"),
            "did you mean `min_idle`?"
        );
        assert_eq!(
            help("zzz", CLAIM.iter().copied(), "valid keys"),
            "valid keys: `min_idle`, `every`, `batch`, `rate`"
        );
    }
}
