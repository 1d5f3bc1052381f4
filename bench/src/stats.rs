//! Small statistics over rounds and latency histograms: median, min, max, percentiles.

/// Median of `values` (mean of the two middle values for an even count); `None` when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

pub fn min(values: &[f64]) -> Option<f64> {
    values.iter().copied().reduce(f64::min)
}

pub fn max(values: &[f64]) -> Option<f64> {
    values.iter().copied().reduce(f64::max)
}

/// The nearest-rank `p`-th percentile (0 < p ≤ 100) of a histogram whose
/// bucket `i` counts the samples of value `i`; `None` when it is empty.
pub fn histogram_percentile(buckets: &[u64], p: f64) -> Option<usize> {
    let total: u64 = buckets.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = ((p / 100.0) * total as f64).ceil().max(1.0) as u64;
    let mut seen = 0;
    for (value, &count) in buckets.iter().enumerate() {
        seen += count;
        if seen >= rank {
            return Some(value);
        }
    }
    Some(buckets.len() - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0]), Some(3.0));
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
    }

    #[test]
    fn min_and_max() {
        assert_eq!(min(&[]), None);
        assert_eq!(min(&[2.0, -1.0, 7.0]), Some(-1.0));
        assert_eq!(max(&[2.0, -1.0, 7.0]), Some(7.0));
    }

    #[test]
    fn histogram_percentiles_use_the_nearest_rank() {
        assert_eq!(histogram_percentile(&[0, 0, 0], 50.0), None);
        // 100 samples: 50 of 1 ms, 49 of 2 ms, 1 of 9 ms.
        let mut buckets = vec![0; 10];
        buckets[1] = 50;
        buckets[2] = 49;
        buckets[9] = 1;
        assert_eq!(histogram_percentile(&buckets, 50.0), Some(1));
        assert_eq!(histogram_percentile(&buckets, 51.0), Some(2));
        assert_eq!(histogram_percentile(&buckets, 99.0), Some(2));
        assert_eq!(histogram_percentile(&buckets, 100.0), Some(9));
        assert_eq!(histogram_percentile(&buckets, 0.0), Some(1));
    }
}
