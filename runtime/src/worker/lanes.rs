//! Which lane the intake reads first: each lane's share of deliveries follows its weight while every lane has a backlog.
//!
//! Weighted, not strict: a strict order would leave a low lane unread for as
//! long as a high one has a backlog, which under steady load is forever.
//! This is start-time fair queuing over lanes: each lane has a virtual time
//! that advances by `entries / weight` for what it was delivered, and a
//! round reads the lane furthest behind first, falling through to the next
//! lanes with the permits the first one left unused. A lane found empty
//! catches up to the others' virtual time, so an idle lane banks no credit
//! and cannot starve the others when its jobs return.

/// The lanes' virtual times, by lane slot (stream number / partitions).
#[derive(Debug, Clone)]
pub(super) struct LaneShares {
    weights: Vec<f64>,
    virtual_time: Vec<f64>,
}

impl LaneShares {
    /// Shares for the queue's lanes; `None` without lanes (one stream per partition).
    pub(super) fn new(config: &crate::config::QueueConfig) -> Option<LaneShares> {
        if config.lanes.len() < 2 {
            return None;
        }
        let weights: Vec<f64> = (0..config.lanes.len() as u16)
            .map(|slot| {
                let lane = config
                    .lane_of_stream(crate::StreamSlot::new(slot * config.partitions))
                    .expect("every slot below the lane count is a lane");
                f64::from(lane.weight.max(1))
            })
            .collect();
        Some(LaneShares {
            virtual_time: vec![0.0; weights.len()],
            weights,
        })
    }

    /// Lane slots in the order to read them: furthest behind first, the
    /// heavier lane on a tie.
    pub(super) fn order(&self) -> Vec<usize> {
        let mut slots: Vec<usize> = (0..self.weights.len()).collect();
        slots.sort_by(|&a, &b| {
            self.virtual_time[a]
                .total_cmp(&self.virtual_time[b])
                .then(self.weights[b].total_cmp(&self.weights[a]))
                .then(a.cmp(&b))
        });
        slots
    }

    /// Records one round: `delivered[slot]` entries per lane, and the lanes
    /// it read and found empty.
    pub(super) fn record(&mut self, delivered: &[usize], empty: &[bool]) {
        for (slot, &entries) in delivered.iter().enumerate() {
            self.virtual_time[slot] += entries as f64 / self.weights[slot];
        }
        let Some(floor) = (0..self.weights.len())
            .filter(|&slot| !empty[slot])
            .map(|slot| self.virtual_time[slot])
            .min_by(f64::total_cmp)
        else {
            return;
        };
        for slot in (0..self.weights.len()).filter(|&slot| empty[slot]) {
            self.virtual_time[slot] = self.virtual_time[slot].max(floor);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::{LANES, OCR};
    use crate::config::QueueConfig;

    fn shares() -> LaneShares {
        LaneShares::new(&QueueConfig {
            partitions: 4,
            lanes: std::borrow::Cow::Borrowed(LANES),
            default_lane: 1,
            ..OCR
        })
        .expect("three lanes")
    }

    /// Serves `rounds` rounds of `per_round` entries from the first lane in order.
    fn serve(shares: &mut LaneShares, rounds: usize, per_round: usize) -> Vec<usize> {
        let mut handled = vec![0; 3];
        for _ in 0..rounds {
            let first = shares.order()[0];
            let mut delivered = vec![0; 3];
            delivered[first] = per_round;
            handled[first] += per_round;
            shares.record(&delivered, &[false; 3]);
        }
        handled
    }

    #[test]
    fn a_backlog_in_every_lane_is_served_by_weight() {
        // Slots: normal (default, 3), high (6), low (1).
        let mut shares = shares();
        assert_eq!(
            shares.order()[0],
            1,
            "the heaviest lane goes first on a tie"
        );
        let handled = serve(&mut shares, 1000, 7);
        // 7,000 entries in 6:3:1, give or take one round.
        for (slot, want) in [(0, 2100), (1, 4200), (2, 700)] {
            assert!(handled[slot].abs_diff(want) <= 7, "{handled:?}");
        }
    }

    #[test]
    fn an_empty_lane_banks_no_credit() {
        let mut shares = shares();
        // Low is empty for a long time while the others are served.
        for _ in 0..1000 {
            let first = shares.order()[0];
            let mut delivered = vec![0; 3];
            let mut empty = [false; 3];
            if first == 2 {
                empty[2] = true;
                delivered[shares.order()[1]] = 5;
            } else {
                delivered[first] = 5;
            }
            shares.record(&delivered, &empty);
        }
        // Its jobs return: it gets its share from now on, not a catch-up burst.
        let handled = serve(&mut shares, 100, 10);
        assert!(handled[2] <= 110, "low took {} of 1000", handled[2]);
        assert!(handled[2] >= 90, "low took {} of 1000", handled[2]);
    }

    #[test]
    fn no_lanes_no_shares() {
        assert!(LaneShares::new(&OCR).is_none());
    }
}
