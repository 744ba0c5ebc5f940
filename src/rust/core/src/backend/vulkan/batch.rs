//! How long graphs are cut into submissions: each batch of dispatches
//! should take about [`BATCH_BUDGET_NS`] of device time, predicted from the
//! time per workgroup measured for each shader variant, so that a stop
//! requested between batches (Ctrl-C) is answered within about that long.

use super::shaders::Variant;
use std::collections::HashMap;

/// The device time one submission should take, so that Ctrl-C is answered
/// within about that long (a single dispatch longer than this still runs
/// to its end).
pub const BATCH_BUDGET_NS: u64 = 200_000_000;

/// A graph of at most this many dispatches is one submission even when
/// some of its shaders are not timed yet (their cost is not known until a
/// batch has run them). In a longer graph, a batch ends right after the
/// first dispatch of a shader not yet timed, so that each new shader is
/// timed on one dispatch before batches are sized by it: a fresh context
/// answers Ctrl-C after about one dispatch, not after a batch of unknown
/// length.
pub const UNTIMED_BATCH: usize = 16;

/// Device time per workgroup of each shader variant, in picoseconds,
/// measured on the batches run so far.
#[derive(Debug, Default)]
pub struct Speeds(HashMap<Variant, u64>);

impl Speeds {
    /// Predicted picoseconds of `groups` workgroups of `v` (None: not timed).
    fn cost(&self, v: Variant, groups: u64) -> Option<u128> {
        self.0.get(&v).map(|&ps| u128::from(ps) * u128::from(groups))
    }

    /// Learn from a batch of `(variant, groups)` that took `ps` picoseconds:
    /// untimed variants get the time the timed ones leave, shared by
    /// workgroup; when all were timed, every estimate is scaled to the
    /// measurement.
    pub(crate) fn learn(&mut self, batch: &[(Variant, u64)], ps: u128) {
        let known: u128 = batch.iter().filter_map(|&(v, g)| self.cost(v, g)).sum();
        let untimed: u64 = batch.iter().filter(|(v, _)| !self.0.contains_key(v)).map(|&(_, g)| g).sum();
        let clamp = |x: u128| x.clamp(1, u128::from(u64::MAX)) as u64;
        if untimed > 0 {
            let each = clamp(ps.saturating_sub(known) / u128::from(untimed));
            for &(v, _) in batch {
                self.0.entry(v).or_insert(each);
            }
        } else if known > 0 {
            let mut seen = Vec::new();
            for &(v, _) in batch {
                if !seen.contains(&v) {
                    seen.push(v);
                    if let Some(e) = self.0.get_mut(&v) {
                        *e = clamp(u128::from(*e) * ps / known);
                    }
                }
            }
        }
    }
}

/// The end of the batch starting at `start` of `batch` (each dispatch's
/// variant and workgroups): as many dispatches as fit in
/// [`BATCH_BUDGET_NS`] at the speeds measured, and at least one; in a
/// graph longer than [`UNTIMED_BATCH`], none past the first of a shader
/// not yet timed.
pub(crate) fn batch_end(batch: &[(Variant, u64)], start: usize, speeds: &Speeds) -> usize {
    let budget = u128::from(BATCH_BUDGET_NS) * 1000;
    let long = batch.len() > UNTIMED_BATCH;
    let mut spent = 0u128;
    let mut end = start;
    while let Some(&(v, g)) = batch.get(end) {
        let cost = speeds.cost(v, g);
        spent += cost.unwrap_or(0);
        if end > start && spent > budget {
            break;
        }
        end += 1;
        if long && cost.is_none() {
            break;
        }
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    fn variant(op: u32) -> Variant {
        Variant { shader: super::super::shaders::Shader::Eltwise, op, sub: 0, all_f32: true }
    }

    #[test]
    fn batches_fill_the_budget_and_hold_at_least_one_dispatch() {
        let (mm, add) = (variant(1), variant(2));
        let graph = vec![(mm, 1000u64); 1000];
        let mut speeds = Speeds::default();
        // A short graph of untimed shaders is one batch; in a long one, an
        // untimed shader's first dispatch ends its batch.
        let short = vec![(mm, 1000u64); UNTIMED_BATCH];
        assert_eq!(batch_end(&short, 0, &speeds), UNTIMED_BATCH);
        assert_eq!(batch_end(&graph, 0, &speeds), 1);
        assert_eq!(batch_end(&graph, 990, &speeds), 991);
        // one dispatch of 1000 groups in 1 ms: 1 us per group, 200 per batch.
        speeds.learn(&graph[..1], 1_000_000_000);
        assert_eq!(speeds.cost(mm, 1), Some(1_000_000));
        assert_eq!(batch_end(&graph, 0, &speeds), 200);
        assert_eq!(batch_end(&graph, 950, &speeds), 1000);
        // Timed dispatches before an untimed one share its batch.
        let mut mixed_long = vec![(mm, 1000u64); 5];
        mixed_long.extend(vec![(add, 10u64); 100]);
        assert_eq!(batch_end(&mixed_long, 0, &speeds), 6);
        // A new shader in the batch: timed ones keep theirs, it gets the rest.
        let mixed = vec![(mm, 1000), (add, 10)];
        speeds.learn(&mixed, 1_010_000_000);
        assert_eq!(speeds.cost(add, 1), Some(1_000_000));
        // All timed, twice as slow as predicted: every estimate doubles.
        speeds.learn(&mixed, 2 * 1_010_000_000);
        assert_eq!(speeds.cost(mm, 1), Some(2_000_000));
        assert_eq!(speeds.cost(add, 1), Some(2_000_000));
        // A dispatch slower than the budget still runs, alone.
        speeds.learn(&[(mm, 1)], u128::from(u64::MAX));
        assert_eq!(batch_end(&[(mm, 1), (mm, 1)], 0, &speeds), 1);
    }
}
