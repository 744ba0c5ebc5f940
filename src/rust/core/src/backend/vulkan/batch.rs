//! How long graphs are cut into submissions: each batch of dispatches
//! should take about [`BATCH_BUDGET_NS`] of device time, predicted from the
//! time per workgroup measured for each shader variant, so that a stop
//! requested between batches (Ctrl-C) is answered within about that long.
//! A dispatch longer than that is split: a batch may end inside it, after
//! some of its workgroups (`vkCmdDispatchBase` runs the rest later), so one
//! huge operation is interruptible too; the smallest piece is one workgroup.

use super::shaders::Variant;
use std::collections::HashMap;

/// The device time one submission should take, so that Ctrl-C is answered
/// within about that long.
pub const BATCH_BUDGET_NS: u64 = 200_000_000;

/// A graph of at most this many dispatches is one submission even when
/// some of its shaders are not timed yet (their cost is not known until a
/// batch has run them). In a longer graph, a batch ends right after the
/// first dispatch of a shader not yet timed, so that each new shader is
/// timed on one dispatch before batches are sized by it: a fresh context
/// answers Ctrl-C after about one dispatch, not after a batch of unknown
/// length.
pub const UNTIMED_BATCH: usize = 16;

/// Workgroups of the first piece of an untimed shader's dispatch that has
/// more (where dispatches can be split): that piece ends its batch and
/// times the shader, so even the first huge dispatch of a fresh context
/// answers Ctrl-C after a small part of it.
pub const PROBE_GROUPS: u64 = 8;

/// An untimed dispatch is probed only when it is also larger than this many
/// units of work (workgroups times weight): short graphs of small
/// dispatches stay one submission on a fresh context.
pub const PROBE_UNITS: u64 = 1 << 16;

/// Where a batch starts: dispatch `at`, from its workgroup `group` (in the
/// dispatch's linear order: x fastest, then y, then z).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Cursor {
    pub at: usize,
    pub group: u64,
}

/// A dispatch's share of a batch: its workgroups `from..to` (linear order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Piece {
    pub at: usize,
    pub from: u64,
    pub to: u64,
}

/// Device time per unit of work of each shader variant, in picoseconds,
/// measured on the batches run so far. A unit is one workgroup times the
/// dispatch's weight (the length of a product's inner loop, 1 for most
/// kernels), so a product's speed measured on a short inner loop still
/// predicts a long one.
#[derive(Debug, Default)]
pub struct Speeds(HashMap<Variant, u64>, #[cfg(test)] Option<u64>);

impl Speeds {
    /// Picoseconds per unit of `v` (None: not timed).
    fn per_group(&self, v: Variant) -> Option<u64> {
        #[cfg(test)]
        if let Some(ps) = self.1 {
            return Some(ps);
        }
        self.0.get(&v).copied()
    }

    /// Predicted picoseconds of `units` units of `v` (None: not timed).
    fn cost(&self, v: Variant, units: u64) -> Option<u128> {
        self.per_group(v).map(|ps| u128::from(ps) * u128::from(units))
    }

    /// Tests: every shader takes `ps` picoseconds per workgroup, whatever
    /// is measured (None: back to measuring).
    #[cfg(test)]
    pub(crate) fn pin(&mut self, ps: Option<u64>) {
        self.1 = ps;
    }

    /// Learn from a batch of `(variant, groups)` that took `ps` picoseconds:
    /// untimed variants get the time the timed ones leave, shared by
    /// workgroup; when all were timed, every estimate is scaled to the
    /// measurement.
    pub(crate) fn learn(&mut self, batch: &[(Variant, u64)], ps: u128) {
        #[cfg(test)]
        if self.1.is_some() {
            return;
        }
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

/// The pieces of the batch starting at `start` of `batch` (each dispatch's
/// variant, workgroups and weight): as many workgroups as fit in
/// [`BATCH_BUDGET_NS`] at the speeds measured, and at least one; in a
/// graph longer than [`UNTIMED_BATCH`], none past the first dispatch of a
/// shader not yet timed. With `split` (the device runs dispatches from a
/// base workgroup), a batch may end inside a dispatch: where the budget
/// runs out, or after the first [`PROBE_GROUPS`] workgroups of an untimed
/// shader's dispatch of more than [`PROBE_UNITS`]; without it, dispatches
/// are whole.
pub(crate) fn next_batch(batch: &[(Variant, u64, u64)], start: Cursor, speeds: &Speeds, split: bool) -> Vec<Piece> {
    let budget = u128::from(BATCH_BUDGET_NS) * 1000;
    let long = batch.len() > UNTIMED_BATCH;
    let mut spent = 0u128;
    let mut out = Vec::new();
    let mut at = start;
    while let Some(&(v, g, weight)) = batch.get(at.at) {
        let left = g.saturating_sub(at.group);
        let first = out.is_empty();
        let timed = speeds.per_group(v).map(|ps| ps.saturating_mul(weight.max(1)));
        let take = match timed {
            Some(ps) => {
                let afford = budget.saturating_sub(spent) / u128::from(ps.max(1));
                let afford = u64::try_from(afford).unwrap_or(u64::MAX);
                if afford >= left {
                    left
                } else if !split {
                    if first { left } else { 0 }
                } else if first {
                    afford.max(1)
                } else {
                    afford
                }
            }
            None if split && left > PROBE_GROUPS && g.saturating_mul(weight) > PROBE_UNITS => PROBE_GROUPS,
            None => left,
        };
        if take == 0 {
            break;
        }
        out.push(Piece { at: at.at, from: at.group, to: at.group + take });
        spent += timed.map_or(0, |ps| u128::from(ps) * u128::from(take));
        if take < left {
            break;
        }
        at = Cursor { at: at.at + 1, group: 0 };
        if long && timed.is_none() {
            break;
        }
    }
    out
}

/// The boxes (base workgroup, workgroup counts) that cover workgroups
/// `from..to` of a dispatch of `grid` workgroups in linear order (x
/// fastest): a partial row, whole rows to the end of a plane, whole planes,
/// whole rows, a partial row; at most five, none empty. Nothing when the
/// grid is empty.
// BOUNDS-FN: `grid` is a [u32; 3], indexed by the constants 0 to 2.
pub(crate) fn boxes(grid: [u32; 3], from: u64, to: u64) -> Vec<([u32; 3], [u32; 3])> {
    let mut out = Vec::new();
    if grid.contains(&0) {
        return out;
    }
    let row = u64::from(grid[0]);
    let plane = row * u64::from(grid[1]);
    let to = to.min(plane * u64::from(grid[2]));
    let mut a = from;
    // Every value below is at most a grid dimension, so it fits in u32.
    let w = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    let at = |a: u64| [w(a % row), w(a / row % u64::from(grid[1])), w(a / plane)];
    let mut push = |a: u64, count: [u64; 3]| out.push((at(a), count.map(w)));
    if a < to && a % row != 0 {
        let end = to.min((a / row + 1) * row);
        push(a, [end - a, 1, 1]);
        a = end;
    }
    if a < to && a % plane != 0 {
        let end = (to / row * row).min((a / plane + 1) * plane);
        if end > a {
            push(a, [row, (end - a) / row, 1]);
            a = end;
        }
    }
    let end = to / plane * plane;
    if a < to && end > a {
        push(a, [row, u64::from(grid[1]), (end - a) / plane]);
        a = end;
    }
    let end = to / row * row;
    if a < to && end > a {
        push(a, [row, (end - a) / row, 1]);
        a = end;
    }
    if a < to {
        push(a, [to - a, 1, 1]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn variant(op: u32) -> Variant {
        Variant { shader: super::super::shaders::Shader::Eltwise, op, sub: 0, all_f32: true }
    }

    /// Dispatches of weight 1.
    fn w(batch: &[(Variant, u64)]) -> Vec<(Variant, u64, u64)> {
        batch.iter().map(|&(v, g)| (v, g, 1)).collect()
    }

    /// Where the batch from dispatch `start` ends: (dispatch, workgroup).
    fn end(batch: &[(Variant, u64)], start: usize, speeds: &Speeds, split: bool) -> (usize, u64) {
        let pieces = next_batch(&w(batch), Cursor { at: start, group: 0 }, speeds, split);
        let last = pieces.last().copied().unwrap_or(Piece { at: start, from: 0, to: 0 });
        assert!(pieces.windows(2).all(|w| w[0].at + 1 == w[1].at && w[0].to == batch[w[0].at].1 && w[1].from == 0));
        if last.to < batch[last.at].1 { (last.at, last.to) } else { (last.at + 1, 0) }
    }

    #[test]
    fn batches_fill_the_budget_and_hold_at_least_one_dispatch() {
        let (mm, add) = (variant(1), variant(2));
        let graph = vec![(mm, 1000u64); 1000];
        let mut speeds = Speeds::default();
        // A short graph of untimed shaders is one batch; in a long one, an
        // untimed shader's first dispatch ends its batch.
        let short = vec![(mm, 1000u64); UNTIMED_BATCH];
        assert_eq!(end(&short, 0, &speeds, false), (UNTIMED_BATCH, 0));
        assert_eq!(end(&graph, 0, &speeds, false), (1, 0));
        assert_eq!(end(&graph, 990, &speeds, false), (991, 0));
        // one dispatch of 1000 groups in 1 ms: 1 us per group, 200 per batch.
        speeds.learn(&graph[..1], 1_000_000_000);
        assert_eq!(speeds.cost(mm, 1), Some(1_000_000));
        assert_eq!(end(&graph, 0, &speeds, false), (200, 0));
        assert_eq!(end(&graph, 950, &speeds, false), (1000, 0));
        // Timed dispatches before an untimed one share its batch.
        let mut mixed_long = vec![(mm, 1000u64); 5];
        mixed_long.extend(vec![(add, 10u64); 100]);
        assert_eq!(end(&mixed_long, 0, &speeds, false), (6, 0));
        // A new shader in the batch: timed ones keep theirs, it gets the rest.
        let mixed = vec![(mm, 1000), (add, 10)];
        speeds.learn(&mixed, 1_010_000_000);
        assert_eq!(speeds.cost(add, 1), Some(1_000_000));
        // All timed, twice as slow as predicted: every estimate doubles.
        speeds.learn(&mixed, 2 * 1_010_000_000);
        assert_eq!(speeds.cost(mm, 1), Some(2_000_000));
        assert_eq!(speeds.cost(add, 1), Some(2_000_000));
        // A dispatch slower than the budget still runs, alone, when it
        // cannot be split.
        speeds.learn(&[(mm, 1)], u128::from(u64::MAX));
        assert_eq!(end(&[(mm, 1), (mm, 1)], 0, &speeds, false), (1, 0));
    }

    #[test]
    fn long_dispatches_are_split_at_the_budget_and_untimed_ones_probed() {
        let (mm, add) = (variant(1), variant(2));
        let mut speeds = Speeds::default();
        // An untimed dispatch larger than a probe: its first PROBE_GROUPS
        // workgroups are a batch of their own, even in a short graph.
        let one = [(mm, 100_000u64)];
        assert_eq!(end(&one, 0, &speeds, true), (0, PROBE_GROUPS));
        // A small one is whole, and a short graph of small ones one batch,
        // also when each has more workgroups than a probe.
        let small = vec![(mm, PROBE_GROUPS); 4];
        assert_eq!(end(&small, 0, &speeds, true), (4, 0));
        let modest = vec![(mm, PROBE_UNITS); 4];
        assert_eq!(end(&modest, 0, &speeds, true), (4, 0));
        let p = next_batch(&[(mm, 64, PROBE_UNITS)], Cursor::default(), &speeds, true);
        assert_eq!(p, vec![Piece { at: 0, from: 0, to: PROBE_GROUPS }]);
        // 1 ms per workgroup: 200 workgroups per batch, from where it stopped.
        speeds.learn(&[(mm, 1)], 1_000_000_000);
        let p = next_batch(&w(&one), Cursor { at: 0, group: 16 }, &speeds, true);
        assert_eq!(p, vec![Piece { at: 0, from: 16, to: 216 }]);
        // The tail of a dispatch, then as much of the next as the budget leaves.
        let two = [(mm, 300u64), (mm, 300u64)];
        let p = next_batch(&w(&two), Cursor { at: 0, group: 250 }, &speeds, true);
        assert_eq!(p, vec![Piece { at: 0, from: 250, to: 300 }, Piece { at: 1, from: 0, to: 150 }]);
        // A workgroup slower than the budget is still run, one at a time.
        speeds.learn(&[(add, 1)], 10 * u128::from(BATCH_BUDGET_NS) * 1000);
        let p = next_batch(&w(&[(add, 5)]), Cursor { at: 0, group: 2 }, &speeds, true);
        assert_eq!(p, vec![Piece { at: 0, from: 2, to: 3 }]);
        // ... and never added behind other work once the budget is spent.
        let p = next_batch(&w(&[(mm, 10), (add, 5)]), Cursor::default(), &speeds, true);
        assert_eq!(p, vec![Piece { at: 0, from: 0, to: 10 }]);
        // A dispatch of weight 10 costs ten times as much per workgroup.
        let p = next_batch(&[(mm, 300, 10)], Cursor::default(), &speeds, true);
        assert_eq!(p, vec![Piece { at: 0, from: 0, to: 20 }]);
    }

    #[test]
    fn boxes_cover_exactly_the_workgroups_asked_for_in_order() {
        let grids = [[1u32, 1, 1], [7, 1, 1], [5, 3, 1], [4, 3, 2], [3, 1, 4], [6, 5, 7]];
        for g in grids {
            let total = u64::from(g[0]) * u64::from(g[1]) * u64::from(g[2]);
            for from in 0..total {
                for to in from..=total {
                    let bs = boxes(g, from, to);
                    assert!(bs.len() <= 5, "{g:?} {from}..{to}: {bs:?}");
                    let mut seen = Vec::new();
                    for (base, count) in &bs {
                        assert!(count.iter().all(|&c| c > 0), "{g:?} {from}..{to}: empty box {bs:?}");
                        for z in base[2]..base[2] + count[2] {
                            for y in base[1]..base[1] + count[1] {
                                for x in base[0]..base[0] + count[0] {
                                    assert!(x < g[0] && y < g[1] && z < g[2], "{g:?} {from}..{to}: {bs:?}");
                                    seen.push(u64::from(x) + u64::from(g[0]) * (u64::from(y) + u64::from(g[1]) * u64::from(z)));
                                }
                            }
                        }
                    }
                    assert_eq!(seen, (from..to).collect::<Vec<_>>(), "{g:?} {from}..{to}: {bs:?}");
                }
            }
        }
        assert!(boxes([0, 4, 4], 0, 5).is_empty());
    }
}
