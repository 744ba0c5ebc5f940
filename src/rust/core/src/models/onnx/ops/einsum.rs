//! Einsum: the equation parsed (with `...`), repeated letters of an operand
//! taken as diagonals (a gather), letters only one operand has summed, and
//! each pair of operands contracted as one batched matrix product between
//! transposes and reshapes; more operands fold left to right.

use super::common::{one, Fold, Lower};
use crate::models::onnx::dev::{permute, reduce, reshape};
use crate::models::onnx::host::{fmt_shape, strides};
use crate::models::onnx::model::OnnxNode;
use crate::models::onnx::plan::Planner;
use crate::models::onnx::val::{Dev, Val};
use crate::op::{Op, RowFn};
use anyhow::{bail, ensure};

pub fn find(op: &str) -> Option<(Option<Lower>, Option<Fold>)> {
    Some(match op {
        "Einsum" => (Some(lower_einsum), None),
        _ => return None,
    })
}

/// Operand subscripts and the output's, with `...` replaced by letters
/// that cannot clash (upper-case letters after 'Z' are not valid input).
// BOUNDS-FN: ell has ell_rank entries and every operand's e <= ell_rank (the maximum),
// the output's e is ell_rank.
fn parse(eq: &str, ranks: &[usize]) -> crate::Result<(Vec<Vec<char>>, Vec<char>)> {
    let eq: String = eq.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l.to_string(), Some(r.to_string())),
        None => (eq.clone(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    ensure!(terms.len() == ranks.len(), "the equation '{eq}' has {} operands, the node {}", terms.len(), ranks.len());
    let mut ell_rank = 0usize;
    let mut ops = Vec::new();
    for (t, &r) in terms.iter().zip(ranks) {
        let letters: Vec<char> = t.replace("...", "").chars().collect();
        ensure!(letters.iter().all(|c| c.is_ascii_alphabetic()), "the equation term '{t}' has characters other than letters and '...'");
        let e = if t.contains("...") {
            ensure!(r >= letters.len(), "the equation term '{t}' has more letters than the operand's rank {r}");
            r - letters.len()
        } else {
            ensure!(r == letters.len(), "the equation term '{t}' has {} letters for an operand of rank {r}", letters.len());
            0
        };
        ell_rank = ell_rank.max(e);
        ops.push((t.to_string(), e));
    }
    let ell: Vec<char> = (0..ell_rank)
        .map(|i| u32::try_from(i).ok().and_then(|i| char::from_u32(0x100 + i)))
        .collect::<Option<_>>()
        .ok_or_else(|| anyhow::anyhow!("the equation '{eq}' spans {ell_rank} dimensions with '...'; at most 50000 are supported"))?;
    let expand = |t: &str, e: usize| -> Vec<char> {
        let mut v = Vec::new();
        match t.split_once("...") {
            Some((a, b)) => {
                v.extend(a.chars());
                v.extend_from_slice(&ell[ell_rank - e..]);
                v.extend(b.chars());
            }
            None => v.extend(t.chars()),
        }
        v
    };
    let subs: Vec<Vec<char>> = ops.iter().map(|(t, e)| expand(t, *e)).collect();
    let out = match rhs {
        Some(r) => expand(&r, ell_rank),
        None => {
            // Implicit output: the ellipsis, then letters used once, sorted.
            let mut v = ell.clone();
            let mut once: Vec<char> = subs.iter().flatten().copied().filter(|c| c.is_ascii_alphabetic()).collect();
            once.sort_unstable();
            let counts = |c: char| subs.iter().flatten().filter(|&&x| x == c).count();
            once.dedup();
            v.extend(once.into_iter().filter(|&c| counts(c) == 1));
            v
        }
    };
    Ok((subs, out))
}

/// `x` with every repeated letter of `s` reduced to its diagonal.
// BOUNDS-FN: s has one letter per dimension of x (parse checks each term's letters
// against its operand's rank), so every letter of uniq occurs in s and dims is non-
// empty; q has uniq.len() entries and st has s.len().
fn diagonals(p: &mut Planner, x: Dev, s: &[char]) -> crate::Result<(Dev, Vec<char>)> {
    let mut uniq: Vec<char> = Vec::new();
    for &c in s {
        if !uniq.contains(&c) {
            uniq.push(c);
        }
    }
    if uniq.len() == s.len() {
        return Ok((x, s.to_vec()));
    }
    let st = strides(&x.shape);
    let mut shape = Vec::new();
    for &c in &uniq {
        let dims: Vec<usize> = s.iter().zip(&x.shape).filter(|(&d, _)| d == c).map(|(_, &n)| n).collect();
        ensure!(dims.iter().all(|&n| n == dims[0]), "letter '{c}' has different sizes {dims:?}");
        shape.push(dims[0]);
    }
    let idx = crate::models::onnx::host::index_map(&shape, |q| {
        // INVARIANT: uniq holds every letter of s.
        s.iter().enumerate().map(|(k, c)| q[uniq.iter().position(|u| u == c).expect("a letter")] * st[k]).sum()
    })?;
    let n: usize = x.shape.iter().product();
    let flat = reshape(p.eb(), &x, vec![n])?;
    let g = super::shape::gather_axis(p, &flat, 0, idx.iter().map(|&i| i as f32).collect())?;
    Ok((reshape(p.eb(), &g, shape)?, uniq))
}

/// Sums `x` over the letters of `s` not in `keep`.
// BOUNDS-FN: i < s.len().
fn sum_out(p: &mut Planner, x: Dev, s: Vec<char>, keep: &[char]) -> crate::Result<(Dev, Vec<char>)> {
    let ax: Vec<usize> = (0..s.len()).filter(|&i| !keep.contains(&s[i])).collect();
    if ax.is_empty() {
        return Ok((x, s));
    }
    let y = reduce(p.eb(), RowFn::Sum, &x, &ax, false)?;
    Ok((y, s.into_iter().filter(|c| keep.contains(c)).collect()))
}

fn transpose_to(p: &mut Planner, x: &Dev, s: &[char], order: &[char]) -> crate::Result<Dev> {
    // INVARIANT: order is a permutation of the letters of s.
    let perm: Vec<usize> = order.iter().map(|c| s.iter().position(|x| x == c).expect("a letter")).collect();
    permute(p.eb(), x, &perm)
}

// BOUNDS-FN: k < subs.len() (the zip with subs), so k + 1 <= subs.len().
fn lower_einsum(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let eq = n.string("equation", "");
    ensure!(!eq.is_empty(), "Einsum needs an equation");
    let vals: Vec<Val> = ins.iter().flatten().cloned().collect();
    ensure!(!vals.is_empty(), "Einsum needs at least one input");
    let ranks: Vec<usize> = vals.iter().map(|v| v.shape().len()).collect();
    let (subs, out) = parse(&eq, &ranks)?;
    let mut cur: Option<(Dev, Vec<char>)> = None;
    for (k, (v, s)) in vals.iter().zip(&subs).enumerate() {
        let x = p.dev(v)?;
        let (x, s) = diagonals(p, x, s)?;
        // Letters needed later: the output's and the remaining operands'.
        let mut later: Vec<char> = out.clone();
        for t in &subs[k + 1..] {
            later.extend(t.iter().copied());
        }
        let (x, s) = match &cur {
            None => sum_out(p, x, s, &later)?,
            Some((_, cs)) => {
                let mut keep = later.clone();
                keep.extend(cs.iter().copied());
                sum_out(p, x, s, &keep)?
            }
        };
        cur = Some(match cur.take() {
            None => (x, s),
            Some((a, sa)) => contract(p, a, sa, x, s, &later)?,
        });
    }
    // INVARIANT: the loop above ran once per operand, and there is at least one.
    let (x, s) = cur.expect("one operand");
    let (x, s) = sum_out(p, x, s, &out)?;
    ensure!(s.len() == out.len(), "Einsum: the output letters do not all appear in the inputs");
    let y = transpose_to(p, &x, &s, &out)?;
    one(Dev { t: p.b.op(Op::Cont, &[y.t.clone()])?, ..y })
}

/// a (letters sa) times b (letters sb), summing the shared letters not in `keep`.
// BOUNDS-FN: each operand has one letter per dimension (parse, diagonals, sum_out and
// contract keep the letters and the shape in step), so a letter's position in s is
// below x.shape.len(); sb[..] is the whole.
fn contract(p: &mut Planner, a: Dev, sa: Vec<char>, b: Dev, sb: Vec<char>, keep: &[char]) -> crate::Result<(Dev, Vec<char>)> {
    let (a, sa) = sum_out(p, a, sa.clone(), &[keep, &sb[..]].concat())?;
    let (b, sb) = sum_out(p, b, sb.clone(), &[keep, &sa[..]].concat())?;
    let batch: Vec<char> = sa.iter().copied().filter(|c| sb.contains(c) && keep.contains(c)).collect();
    let sum: Vec<char> = sa.iter().copied().filter(|c| sb.contains(c) && !keep.contains(c)).collect();
    let left: Vec<char> = sa.iter().copied().filter(|c| !sb.contains(c)).collect();
    let right: Vec<char> = sb.iter().copied().filter(|c| !sa.contains(c)).collect();
    // INVARIANT: asked only for letters of sa or sb, drawn from s.
    let size = |x: &Dev, s: &[char], c: char| x.shape[s.iter().position(|&y| y == c).expect("a letter")];
    for &c in batch.iter().chain(&sum) {
        ensure!(size(&a, &sa, c) == size(&b, &sb, c), "letter '{c}' has sizes {} and {}", size(&a, &sa, c), size(&b, &sb, c));
    }
    let prod = |x: &Dev, s: &[char], l: &[char]| -> usize { l.iter().map(|&c| size(x, s, c)).product() };
    let (nb, nl, nk, nr) = (prod(&a, &sa, &batch), prod(&a, &sa, &left), prod(&a, &sa, &sum), prod(&b, &sb, &right));
    let at = transpose_to(p, &a, &sa, &[batch.clone(), left.clone(), sum.clone()].concat())?;
    let bt = transpose_to(p, &b, &sb, &[batch.clone(), sum.clone(), right.clone()].concat())?;
    let at = reshape(p.eb(), &at, vec![nb, nl, nk])?;
    let bt = reshape(p.eb(), &bt, vec![nb, nk, nr])?;
    let y = super::matmul::matmul(p, &Val::D(at), &Val::D(bt))?;
    let mut shape: Vec<usize> = batch.iter().map(|&c| size(&a, &sa, c)).collect();
    shape.extend(left.iter().map(|&c| size(&a, &sa, c)));
    shape.extend(right.iter().map(|&c| size(&b, &sb, c)));
    let y = reshape(p.eb(), &y, shape)?;
    let letters = [batch, left, right].concat();
    if letters.is_empty() && !y.shape.is_empty() {
        bail!("internal: einsum letters {}", fmt_shape(&y.shape));
    }
    Ok((y, letters))
}
