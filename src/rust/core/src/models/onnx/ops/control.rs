//! Control flow: If, Loop and Scan, unrolled while planning. An If whose
//! condition is known plans only its branch; a condition or trip count
//! computed from input values is read (the plan is then made for every
//! run). Loops without a bound stop after `MAX_ITERATIONS`.

use super::common::{opt, Fold, Lower};
use crate::models::onnx::dev::{concat, narrow, reshape};
use crate::models::onnx::elem::Elem;
use crate::models::onnx::host::{fmt_shape, HTensor};
use crate::models::onnx::model::{OnnxGraph, OnnxNode};
use crate::models::onnx::plan::Planner;
use crate::models::onnx::val::{Taint, Val};
use anyhow::ensure;
use std::sync::Arc;

pub fn find(op: &str) -> Option<(Option<Lower>, Option<Fold>)> {
    Some(match op {
        "If" => (Some(lower_if), None),
        "Loop" => (Some(lower_loop), None),
        "Scan" => (Some(lower_scan), None),
        _ => return None,
    })
}

/// Iterations after which a loop is refused (a file cannot make the
/// importer spin for ever).
pub const MAX_ITERATIONS: usize = 1 << 16;

fn graph<'a>(n: &'a OnnxNode, name: &str) -> crate::Result<&'a Arc<OnnxGraph>> {
    n.graph(name).ok_or_else(|| anyhow::anyhow!("{} needs its '{name}' graph attribute", n.op))
}

/// Runs body `g` with `inputs` bound to its inputs in order.
fn body(p: &mut Planner, g: &OnnxGraph, inputs: Vec<Val>) -> crate::Result<Vec<Val>> {
    ensure!(
        inputs.len() == g.inputs.len(),
        "the body graph '{}' has {} inputs, the loop gives {}",
        g.name,
        g.inputs.len(),
        inputs.len()
    );
    let named: Vec<(String, Val)> = g.inputs.iter().map(|i| i.name.clone()).zip(inputs).collect();
    p.run_graph(g, &named)
}

fn lower_if(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let c = super::common::arg(ins, 0, "cond")?.clone();
    let cond = p.value_of(&c, "condition")?.scalar("the If condition")? != 0.0;
    let g = graph(n, if cond { "then_branch" } else { "else_branch" })?.clone();
    body(p, &g, Vec::new())
}

fn scalar_val(v: i64, elem: Elem) -> Val {
    // INVARIANT: a rank-0 shape holds exactly the one value given.
    Val::c(HTensor::from_i64(elem, Vec::new(), vec![v]).expect("a scalar"), Taint::Static)
}

/// Stacks per-iteration values along a new axis `axis` (reversed when asked).
// BOUNDS-FN: parts is non-empty (checked) and ds has one entry per part.
fn stack(p: &mut Planner, parts: Vec<Val>, axis: usize, reverse: bool) -> crate::Result<Val> {
    if parts.is_empty() {
        return Ok(Val::c(HTensor::from_f64(Elem::F32, vec![0], Vec::new())?, Taint::Shape));
    }
    let mut ds = Vec::with_capacity(parts.len());
    for v in &parts {
        let d = p.dev(v)?;
        let mut s = d.shape.clone();
        ensure!(axis <= s.len(), "scan output axis {axis} is out of range for rank {}", s.len());
        s.insert(axis, 1);
        ds.push(reshape(p.eb(), &d, s)?);
    }
    if reverse {
        ds.reverse();
    }
    for d in &ds[1..] {
        ensure!(d.shape == ds[0].shape, "the scan outputs change shape between iterations ({} and {})", fmt_shape(&ds[0].shape), fmt_shape(&d.shape));
    }
    Ok(Val::D(concat(p.eb(), &ds, axis)?))
}

// BOUNDS-FN: outs.len() > n_carried is checked, so outs[0], outs[1..=n_carried] and
// outs[n_carried + 1..] exist; every iteration's scan outputs are checked to be as many
// as scans holds.
fn lower_loop(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let g = graph(n, "body")?.clone();
    let max = match opt(ins, 0) {
        Some(v) => Some(p.value_of(v, "trip count")?.scalar("the trip count")? as i64),
        None => None,
    };
    let mut cond = match opt(ins, 1) {
        Some(v) => p.value_of(v, "condition")?.scalar("the loop condition")? != 0.0,
        None => true,
    };
    let mut carried: Vec<Val> = ins.iter().skip(2).map(|v| v.clone().ok_or_else(|| anyhow::anyhow!("a loop-carried value is missing"))).collect::<crate::Result<_>>()?;
    let n_carried = carried.len();
    let mut scans: Vec<Vec<Val>> = Vec::new();
    let mut i: i64 = 0;
    while cond && max.is_none_or(|m| i < m) {
        ensure!((i as usize) < MAX_ITERATIONS, "the Loop ran {MAX_ITERATIONS} iterations without stopping");
        let mut inputs = vec![scalar_val(i, Elem::I64), scalar_val(cond as i64, Elem::Bool)];
        inputs.extend(carried.iter().cloned());
        let outs = body(p, &g, inputs)?;
        ensure!(outs.len() > n_carried, "the Loop body gives {} outputs for {} carried values", outs.len(), n_carried);
        cond = p.value_of(&outs[0], "loop condition")?.scalar("the loop condition")? != 0.0;
        carried = outs[1..=n_carried].to_vec();
        let sc = &outs[n_carried + 1..];
        if scans.is_empty() {
            scans = vec![Vec::new(); sc.len()];
        }
        ensure!(sc.len() == scans.len(), "the Loop body gives {} scan outputs, after {} before", sc.len(), scans.len());
        for (k, v) in sc.iter().enumerate() {
            scans[k].push(v.clone());
        }
        i += 1;
    }
    let mut outs = carried;
    let n_scan = g.outputs.len().saturating_sub(1 + n_carried);
    for k in 0..n_scan {
        let parts = scans.get(k).cloned().unwrap_or_default();
        outs.push(stack(p, parts, 0, false)?);
    }
    Ok(outs)
}

/// One Scan: `states` carried through the body, `xs` (tensor, axis,
/// reversed) sliced per iteration; returns the final states and the
/// stacked scan outputs (axes and directions per output).
struct ScanArgs {
    in_axes: Vec<i64>,
    in_dirs: Vec<i64>,
    out_axes: Vec<i64>,
    out_dirs: Vec<i64>,
}

// BOUNDS-FN: ax is normalised to d's rank; outs.len() == n_states + n_scan_out is
// checked and scans has n_scan_out entries.
fn scan(p: &mut Planner, g: &OnnxGraph, mut states: Vec<Val>, xs: &[Val], a: &ScanArgs) -> crate::Result<Vec<Val>> {
    let n_states = states.len();
    let mut xdev = Vec::new();
    let mut len = None;
    for (k, x) in xs.iter().enumerate() {
        let d = p.dev(x)?;
        let ax = super::common::axis(*a.in_axes.get(k).unwrap_or(&0), d.shape.len())?;
        let l = d.shape[ax];
        if let Some(prev) = len {
            ensure!(prev == l, "the scan inputs have different lengths ({prev} and {l})");
        }
        len = Some(l);
        xdev.push((d, ax, a.in_dirs.get(k).copied().unwrap_or(0) != 0));
    }
    let len = len.unwrap_or(0);
    ensure!(len <= MAX_ITERATIONS, "a Scan of {len} iterations is too long");
    let n_scan_out = g.outputs.len().saturating_sub(n_states);
    let mut scans: Vec<Vec<Val>> = vec![Vec::new(); n_scan_out];
    for t in 0..len {
        let mut inputs = states.clone();
        for (d, ax, rev) in &xdev {
            let i = if *rev { len - 1 - t } else { t };
            let s = narrow(p.eb(), d, *ax, i, 1)?;
            let mut shape = s.shape.clone();
            shape.remove(*ax);
            inputs.push(Val::D(reshape(p.eb(), &s, shape)?));
        }
        let outs = body(p, g, inputs)?;
        ensure!(outs.len() == n_states + n_scan_out, "the Scan body gives {} outputs, expected {}", outs.len(), n_states + n_scan_out);
        states = outs[..n_states].to_vec();
        for (k, v) in outs[n_states..].iter().enumerate() {
            scans[k].push(v.clone());
        }
    }
    let mut outs = states;
    for (k, parts) in scans.into_iter().enumerate() {
        let rank = parts.first().map_or(0, |v| v.shape().len());
        let ax = *a.out_axes.get(k).unwrap_or(&0);
        let ax = if ax < 0 { ax + rank as i64 + 1 } else { ax };
        ensure!((0..=rank as i64).contains(&ax), "scan output axis {ax} is out of range");
        outs.push(stack(p, parts, ax as usize, a.out_dirs.get(k).copied().unwrap_or(0) != 0)?);
    }
    Ok(outs)
}

// BOUNDS-FN: m <= all.len() is checked, so n_states <= all.len().
fn lower_scan(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let g = graph(n, "body")?.clone();
    let m = n.int("num_scan_inputs", 0).max(0) as usize;
    if p.opset < 9 {
        return lower_scan8(p, n, &g, ins, m);
    }
    let all: Vec<Val> = ins.iter().flatten().cloned().collect();
    ensure!(m <= all.len(), "Scan has {} inputs but num_scan_inputs = {m}", all.len());
    let n_states = all.len() - m;
    let n_scan_out = g.outputs.len().saturating_sub(n_states);
    let a = ScanArgs {
        in_axes: n.ints("scan_input_axes").unwrap_or_else(|| vec![0; m]),
        in_dirs: n.ints("scan_input_directions").unwrap_or_else(|| vec![0; m]),
        out_axes: n.ints("scan_output_axes").unwrap_or_else(|| vec![0; n_scan_out]),
        out_dirs: n.ints("scan_output_directions").unwrap_or_else(|| vec![0; n_scan_out]),
    };
    scan(p, &g, all[..n_states].to_vec(), &all[n_states..], &a)
}

/// Scan-8: a batch axis first on every input and output, an optional
/// first input of sequence lengths (all the full length here), the scan
/// axis after the batch's and `directions` per scan input. Each batch
/// entry is scanned on its own and the results are stacked.
// BOUNDS-FN: narrow along axis 0 checks the rank is at least 1; slices has all.len() >=
// n_states entries; every batch's scan gives as many outputs (n_states plus the body's
// scan outputs), so per[k] exists.
fn lower_scan8(p: &mut Planner, n: &OnnxNode, g: &OnnxGraph, ins: &[Option<Val>], m: usize) -> crate::Result<Vec<Val>> {
    let all: Vec<Val> = ins.iter().skip(1).flatten().cloned().collect();
    ensure!(m <= all.len(), "Scan has {} inputs but num_scan_inputs = {m}", all.len());
    let n_states = all.len() - m;
    let Some(first) = all.first() else { return Ok(Vec::new()) };
    let batch = first.shape().first().copied().unwrap_or(0);
    for v in &all {
        ensure!(v.shape().first() == Some(&batch), "Scan-8's inputs need the batch ({batch}) as their first dimension, not {}", fmt_shape(v.shape()));
    }
    if let Some(sl) = opt(ins, 0) {
        let full = all.get(n_states).map_or(0, |x| x.shape().get(1).copied().unwrap_or(0));
        let lens = p.ints_of(sl, "sequence_lens")?;
        ensure!(lens.iter().all(|&l| l as usize == full), "Scan with sequence_lens {lens:?} shorter than the inputs ({full}) is not supported");
    }
    let a = ScanArgs { in_axes: vec![0; m], in_dirs: n.ints("directions").unwrap_or_else(|| vec![0; m]), out_axes: Vec::new(), out_dirs: Vec::new() };
    let mut per: Vec<Vec<Val>> = Vec::new();
    for b in 0..batch {
        let mut slices = Vec::with_capacity(all.len());
        for v in &all {
            let d = p.dev(v)?;
            let s = narrow(p.eb(), &d, 0, b, 1)?;
            let shape = s.shape[1..].to_vec();
            slices.push(Val::D(reshape(p.eb(), &s, shape)?));
        }
        let outs = scan(p, g, slices[..n_states].to_vec(), &slices[n_states..], &a)?;
        if per.is_empty() {
            per = vec![Vec::new(); outs.len()];
        }
        for (k, v) in outs.into_iter().enumerate() {
            per[k].push(v);
        }
    }
    per.into_iter().map(|parts| stack(p, parts, 0, false)).collect()
}
