//! Recurrent layers: LSTM, GRU and RNN (forward, reverse, bidirectional;
//! batch-first layout; peepholes; clipping; custom activations; sequence
//! lengths). The input projection of the whole sequence is one matrix
//! product; each time step adds the recurrent product and its gates, so the
//! sequence unrolls into one graph computed in one go. On the CPU, an LSTM
//! or RNN over one sequence takes each step's gate products with their bias
//! and activation as fused nodes.

use super::common::{arg, opt, Fold, Lower};
use crate::base::dtype::DType;
use crate::models::onnx::dev::{binary, concat, narrow, permute, reshape, unary};
use crate::models::onnx::elem::Elem;
use crate::models::onnx::host::{fmt_shape, HTensor};
use crate::models::onnx::model::OnnxNode;
use crate::models::onnx::plan::Planner;
use crate::models::onnx::val::{Dev, Val};
use crate::op::{BinFn, MapFn, Op, UnaryOp};
use crate::tensor::Tensor;
use anyhow::{bail, ensure};
use std::sync::Arc;

pub fn find(op: &str) -> Option<(Option<Lower>, Option<Fold>)> {
    Some(match op {
        "LSTM" | "GRU" | "RNN" => (Some(lower_rnn), None),
        _ => return None,
    })
}

/// An activation of the recurrent operators.
fn activation(name: &str, alpha: Option<f32>, beta: Option<f32>) -> crate::Result<Op> {
    Ok(match name.to_ascii_lowercase().as_str() {
        "sigmoid" => Op::Unary(UnaryOp::Sigmoid),
        "tanh" => Op::Unary(UnaryOp::Tanh),
        "relu" => Op::Unary(UnaryOp::Relu),
        "affine" => Op::Map { f: MapFn::Affine, a: alpha.unwrap_or(1.0), b: beta.unwrap_or(0.0) },
        "leakyrelu" => Op::LeakyRelu { slope: alpha.unwrap_or(0.01) },
        "thresholdedrelu" => Op::Map { f: MapFn::ThresholdedRelu, a: alpha.unwrap_or(1.0), b: 0.0 },
        "scaledtanh" => bail!("the ScaledTanh activation is not supported"),
        "hardsigmoid" => Op::Map { f: MapFn::HardSigmoidAB, a: alpha.unwrap_or(0.2), b: beta.unwrap_or(0.5) },
        "elu" => Op::Map { f: MapFn::EluA, a: alpha.unwrap_or(1.0), b: 0.0 },
        "softsign" => Op::Map { f: MapFn::Softsign, a: 0.0, b: 0.0 },
        "softplus" => Op::Map { f: MapFn::Softplus, a: 0.0, b: 0.0 },
        other => bail!("activation '{other}' is not supported"),
    })
}

struct Spec {
    kind: &'static str,
    gates: usize,
    hidden: usize,
    dirs: usize,
    reverse: bool,
    acts: Vec<Op>,
    clip: Option<f32>,
    lbr: bool,
    input_forget: bool,
}

// BOUNDS-FN: W's rank 3 is checked first; defaults has nacts entries (3, 2 or 1 by
// kind) and k < nacts.
fn spec(n: &OnnxNode, w_shape: &[usize]) -> crate::Result<Spec> {
    let (kind, gates, nacts): (&'static str, usize, usize) = match n.op.as_str() {
        "LSTM" => ("LSTM", 4, 3),
        "GRU" => ("GRU", 3, 2),
        _ => ("RNN", 1, 1),
    };
    ensure!(w_shape.len() == 3, "{kind}: W must be [directions, gates * hidden, input], not {}", fmt_shape(w_shape));
    let hidden = if n.has("hidden_size") { n.int("hidden_size", 0) as usize } else { w_shape[1] / gates };
    ensure!(hidden > 0 && w_shape[1] == gates * hidden, "{kind}: W {} does not fit hidden_size {hidden}", fmt_shape(w_shape));
    let direction = n.string("direction", "forward");
    let (dirs, reverse) = match direction.as_str() {
        "forward" => (1, false),
        "reverse" => (1, true),
        "bidirectional" => (2, false),
        other => bail!("{kind}: direction '{other}' is not forward, reverse or bidirectional"),
    };
    ensure!(w_shape[0] == dirs, "{kind}: W has {} directions, the node asks for {dirs}", w_shape[0]);
    let names = n.strings("activations").unwrap_or_default();
    let alphas = n.floats("activation_alpha").unwrap_or_default();
    let betas = n.floats("activation_beta").unwrap_or_default();
    let defaults: &[&str] = match kind {
        "LSTM" => &["Sigmoid", "Tanh", "Tanh"],
        "GRU" => &["Sigmoid", "Tanh"],
        _ => &["Tanh"],
    };
    let mut acts = Vec::new();
    for d in 0..dirs {
        for k in 0..nacts {
            let i = d * nacts + k;
            let name = names.get(i).map(|s| s.as_str()).unwrap_or(defaults[k]);
            acts.push(activation(name, alphas.get(i).copied(), betas.get(i).copied())?);
        }
    }
    let clip = if n.has("clip") { Some(n.float("clip", 0.0)) } else { None };
    Ok(Spec {
        kind,
        gates,
        hidden,
        dirs,
        reverse,
        acts,
        clip,
        lbr: n.int("linear_before_reset", 0) != 0,
        input_forget: n.int("input_forget", 0) != 0,
    })
}

/// Slice `d` of a [dirs, ...] constant as f32 values (an error when `t`
/// has no slice `d`).
// BOUNDS-FN: d < dirs = shape[0] is checked (so the shape is not empty), and the slice
// is taken with get.
fn slab(t: &HTensor, d: usize) -> crate::Result<Vec<f32>> {
    let dirs = t.shape.first().copied().unwrap_or(0);
    ensure!(d < dirs, "a weight of shape {} has no direction {d}", fmt_shape(&t.shape));
    let per = t.numel() / dirs;
    let v = t.f64s();
    let part = v.get(d * per..(d + 1) * per).ok_or_else(|| anyhow::anyhow!("internal: direction {d} of {}", fmt_shape(&t.shape)))?;
    Ok(part.iter().map(|&x| x as f32).collect())
}

/// The activations of an LSTM or RNN step that runs as the CPU backend's
/// fused products (`linear`: product, bias and activation in one node):
/// one sequence (the step's input projection is then one bias vector), no
/// clipping, peepholes or coupled gates, and unary activations only.
struct Fused {
    kind: &'static str,
    acts: Vec<crate::op::UnaryOp>,
}

fn fusable(p: &Planner, s: &Spec, acts: &[Op], batch: usize, peeps: bool) -> Option<Fused> {
    if p.b.backend.is_vulkan() || batch != 1 || s.clip.is_some() || peeps || s.input_forget || s.kind == "GRU" {
        return None;
    }
    let acts = acts
        .iter()
        .map(|a| match a {
            Op::Unary(u) => Some(*u),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Fused { kind: s.kind, acts })
}

/// One time step of one sequence as fused products: `act(R[rows] . v + x[rows])`
/// for row blocks of the recurrent weights `rt` [h, g*h] (x the step's
/// input projection [1, g*h]), then the state update. Returns the new
/// hidden state [1, h] and, for an LSTM, the cell state.
// BOUNDS-FN: f.acts has the kind's activations: 3 for an LSTM, 1 for an RNN (fusable
// refuses a GRU).
fn fused_step(p: &mut Planner, f: &Fused, rt: &Arc<Tensor>, xt: &Dev, hp: &Dev, cp: &Dev, h: usize) -> crate::Result<(Dev, Option<Dev>)> {
    let elem = xt.elem;
    let es = 4;
    // act(R[r0 .. r0 + n] . v + x[r0 .. r0 + n]) as [1, n].
    let lin = |p: &mut Planner, r0: usize, n: usize, v: &Dev, act: crate::op::UnaryOp| -> crate::Result<Dev> {
        let w = p.b.view(rt, [h, n, 1, 1], [es, es * h, es * h * n, es * h * n], r0 * h * es)?;
        let vb = crate::models::onnx::dev::shaped(p.eb(), v, [h, 1, 1, 1])?;
        let bias = narrow(p.eb(), xt, 1, r0, n)?;
        let bias = crate::models::onnx::dev::shaped(p.eb(), &bias, [n, 1, 1, 1])?;
        let t = p.b.op(Op::Linear { act: Some(act) }, &[w, vb, bias])?;
        Ok(Dev { t, shape: vec![1, n], elem })
    };
    let gate = |p: &mut Planner, v: &Dev, k: usize| narrow(p.eb(), v, 1, k * h, h);
    Ok(match f.kind {
        "LSTM" => {
            // Gates i, o, f (the first 3h rows) under one activation, c under its own.
            let iof = lin(p, 0, 3 * h, hp, f.acts[0])?;
            let c = lin(p, 3 * h, h, hp, f.acts[1])?;
            let (i, o, fg) = (gate(p, &iof, 0)?, gate(p, &iof, 1)?, gate(p, &iof, 2)?);
            let fc = binary(p.eb(), BinFn::Mul, &fg, cp, elem)?;
            let ic = binary(p.eb(), BinFn::Mul, &i, &c, elem)?;
            let cn = binary(p.eb(), BinFn::Add, &fc, &ic, elem)?;
            let hc = unary(p.eb(), Op::Unary(f.acts[2]), &cn, elem)?;
            (binary(p.eb(), BinFn::Mul, &o, &hc, elem)?, Some(cn))
        }
        _ => (lin(p, 0, h, hp, f.acts[0])?, None),
    })
}

/// A whole LSTM layer over one sequence as one node (the CPU backend's
/// `RecurrentOp::Lstm`): `xw` is the input projection with its bias
/// [seq, 1, 4h], `rt` the recurrent weights by columns per gate [h, 4h], `hp` and `cp` the
/// initial states [1, h]. Returns Y [seq, 1, 1, h] and the final hidden
/// and cell states [1, 1, h].
// BOUNDS-FN: f.acts has an LSTM's 3 activations (fusable keeps the kind's count).
#[allow(clippy::too_many_arguments)]
fn whole_lstm(p: &mut Planner, f: &Fused, reverse: bool, xw: &Dev, rt: &Arc<Tensor>, hp: &Dev, cp: &Dev, h: usize, seq: usize) -> crate::Result<(Dev, Dev, Dev)> {
    use crate::models::onnx::dev::shaped;
    let elem = xw.elem;
    let es = 4;
    let x = shaped(p.eb(), xw, [4 * h, seq, 1, 1])?;
    let h0 = shaped(p.eb(), hp, [h, 1, 1, 1])?;
    let c0 = shaped(p.eb(), cp, [h, 1, 1, 1])?;
    let op = Op::Recurrent(crate::op::recurrent::RecurrentOp::Lstm { acts: [f.acts[0], f.acts[1], f.acts[2]], reverse });
    let all = p.b.op(op, &[x, rt.clone(), h0, c0])?;
    let y = p.b.view(&all, [h, 1, 1, seq], [es, es * h, es * h, es * h], 0)?;
    let hn = p.b.view(&all, [h, 1, 1, 1], [es, es * h, es * h, es * h], seq * h * es)?;
    let cn = p.b.view(&all, [h, 1, 1, 1], [es, es * h, es * h, es * h], (seq + 1) * h * es)?;
    Ok((
        Dev { t: y, shape: vec![seq, 1, 1, h], elem },
        Dev { t: hn, shape: vec![1, 1, h], elem },
        Dev { t: cn, shape: vec![1, 1, h], elem },
    ))
}

// BOUNDS-FN: X's rank 3 and W's (spec) are checked; B is checked to hold dirs * 2gh
// values; P to be [dirs, 3h] (slab gives 3h values); sequence_lens to have batch
// values; wb, rb have gh entries and i < gh, GRU's gh = 3h; acts has the kind's count
// per direction (0..2 used by an LSTM, 0..1 by a GRU); outs has seq entries.
fn lower_rnn(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let xv = arg(ins, 0, "X")?.clone();
    let w = p.value_of(arg(ins, 1, "W")?, "W")?;
    let r = p.value_of(arg(ins, 2, "R")?, "R")?;
    let s = spec(n, &w.shape)?;
    let h = s.hidden;
    let g = s.gates;
    let layout = n.int("layout", 0);
    let mut x = p.dev(&xv)?;
    ensure!(x.shape.len() == 3, "{}: X must be 3-D, not {}", s.kind, fmt_shape(&x.shape));
    if layout == 1 {
        x = permute(p.eb(), &x, &[1, 0, 2])?;
    }
    let (seq, batch, input) = (x.shape[0], x.shape[1], x.shape[2]);
    ensure!(w.shape[2] == input, "{}: W expects inputs of size {}, X has {input}", s.kind, w.shape[2]);
    ensure!(r.shape == vec![s.dirs, g * h, h], "{}: R must be {}, not {}", s.kind, fmt_shape(&[s.dirs, g * h, h]), fmt_shape(&r.shape));
    let bias = match opt(ins, 3) {
        Some(v) => Some(p.value_of(v, "B")?),
        None => None,
    };
    let lens: Option<Vec<usize>> = match opt(ins, 4) {
        Some(v) => Some(p.ints_of(v, "sequence_lens")?.iter().map(|&l| l.clamp(0, seq as i64) as usize).collect()),
        None => None,
    };
    if let Some(l) = &lens {
        ensure!(l.len() == batch, "{}: sequence_lens has {} values for a batch of {batch}", s.kind, l.len());
    }
    let init_h = match opt(ins, 5) {
        Some(v) => Some(p.dev(v)?),
        None => None,
    };
    let init_c = match opt(ins, 6) {
        Some(v) => Some(p.dev(v)?),
        None => None,
    };
    let peep = match opt(ins, 7) {
        Some(v) => Some(p.value_of(v, "P")?),
        None => None,
    };
    if let Some(pt) = &peep {
        ensure!(pt.shape == [s.dirs, 3 * h], "{}: P must be {}, not {}", s.kind, fmt_shape(&[s.dirs, 3 * h]), fmt_shape(&pt.shape));
    }
    let elem = super::common::float_result(x.elem);
    let key = |tag: &str, d: usize, v: &Val| super::common::derived_key(tag, &[v]).map(|k| format!("{k}/{d}"));
    let (wval, rval) = (arg(ins, 1, "W")?.clone(), arg(ins, 2, "R")?.clone());
    let mut ys = Vec::new();
    let mut hs = Vec::new();
    let mut cs = Vec::new();
    for d in 0..s.dirs {
        let backward = s.reverse || d == 1;
        // Input projection of the whole sequence: [seq * batch, g*h].
        let wv = slab(&w, d)?;
        let wt = p.b.constant(key("rnnW", d, &wval).as_deref(), DType::F32, [input, g * h, 1, 1], || Ok(wv))?;
        let xt = crate::models::onnx::dev::shaped(p.eb(), &x, [input, seq * batch, 1, 1])?;
        let xw = p.b.op(Op::MulMat, &[wt, xt])?;
        let mut xw = Dev { t: xw, shape: vec![seq, batch, g * h], elem };
        let (mut wb, mut rb) = (vec![0f64; g * h], vec![0f64; g * h]);
        if let Some(b) = &bias {
            let bv = b.f64s();
            let per = 2 * g * h;
            ensure!(b.numel() == s.dirs * per, "{}: B must have {} values per direction", s.kind, per);
            wb.copy_from_slice(&bv[d * per..d * per + g * h]);
            rb.copy_from_slice(&bv[d * per + g * h..(d + 1) * per]);
        }
        // GRU's recurrent bias of the hidden gate stays apart with linear_before_reset.
        let sum: Vec<f64> = (0..g * h).map(|i| if s.kind == "GRU" && i >= 2 * h && s.lbr { wb[i] } else { wb[i] + rb[i] }).collect();
        if sum.iter().any(|&v| v != 0.0) {
            let bt = HTensor::from_f64(Elem::F32, vec![g * h], sum)?;
            let bd = p.upload_host(&bt, None, DType::F32)?;
            xw = binary(p.eb(), BinFn::Add, &xw, &bd, elem)?;
        }
        let zero_state = |p: &mut Planner| -> crate::Result<Dev> {
            let t = p.b.data([h, batch, 1, 1], vec![0.0; h * batch])?;
            Ok(Dev { t, shape: vec![batch, h], elem })
        };
        let mut hp = match &init_h {
            Some(v) => {
                let one = narrow(p.eb(), v, 0, d, 1)?;
                reshape(p.eb(), &one, vec![batch, h])?
            }
            None => zero_state(p)?,
        };
        let mut cp = match &init_c {
            Some(v) => {
                let one = narrow(p.eb(), v, 0, d, 1)?;
                reshape(p.eb(), &one, vec![batch, h])?
            }
            None => zero_state(p)?,
        };
        let peeps = match &peep {
            Some(pt) => {
                let pv = slab(pt, d)?;
                let mk = |p: &mut Planner, k: usize| -> crate::Result<Dev> {
                    let t = HTensor::from_f64(Elem::F32, vec![h], pv[k * h..(k + 1) * h].iter().map(|&v| v as f64).collect())?;
                    p.upload_host(&t, None, DType::F32)
                };
                Some([mk(p, 0)?, mk(p, 1)?, mk(p, 2)?])
            }
            None => None,
        };
        let rbh = if s.kind == "GRU" && s.lbr && rb[2 * h..].iter().any(|&v| v != 0.0) {
            let t = HTensor::from_f64(Elem::F32, vec![h], rb[2 * h..].to_vec())?;
            Some(p.upload_host(&t, None, DType::F32)?)
        } else {
            None
        };
        let acts = &s.acts[d * s.acts.len() / s.dirs..(d + 1) * s.acts.len() / s.dirs];
        let short = lens.as_ref().is_some_and(|l| l.iter().any(|&v| v < seq));
        let fused = if short { None } else { fusable(p, &s, acts, batch, peeps.is_some()) };
        if let Some(f) = fused.as_ref().filter(|f| f.kind == "LSTM") {
            // The node takes the recurrent weights by columns within each
            // gate: value i of column q h + k is R[q h + i, k].
            let rv = slab(&r, d)?;
            let rtv: Vec<f32> = (0..g * h * h).map(|x| rv[((x / (h * h)) * h + x % h) * h + (x / h) % h]).collect();
            let rcols = p.b.constant(key("rnnRcols", d, &rval).as_deref(), DType::F32, [h, g * h, 1, 1], || Ok(rtv))?;
            let (y, hn, cn) = whole_lstm(p, f, backward, &xw, &rcols, &hp, &cp, h, seq)?;
            ys.push(y);
            hs.push(hn);
            cs.push(cn);
            continue;
        }
        let rv = slab(&r, d)?;
        let rt = p.b.constant(key("rnnR", d, &rval).as_deref(), DType::F32, [h, g * h, 1, 1], || Ok(rv))?;
        let mut outs: Vec<Option<Dev>> = vec![None; seq];
        for step in 0..seq {
            let t = if backward { seq - 1 - step } else { step };
            let xs = narrow(p.eb(), &xw, 0, t, 1)?;
            let xt = reshape(p.eb(), &xs, vec![batch, g * h])?;
            if let Some(f) = &fused {
                let (hn, cn) = fused_step(p, f, &rt, &xt, &hp, &cp, h)?;
                outs[t] = Some(reshape(p.eb(), &hn, vec![1, 1, 1, h])?);
                hp = hn;
                if let Some(c) = cn {
                    cp = c;
                }
                continue;
            }
            let hr = {
                let hb = crate::models::onnx::dev::shaped(p.eb(), &hp, [h, batch, 1, 1])?;
                let prod = p.b.op(Op::MulMat, &[rt.clone(), hb])?;
                Dev { t: prod, shape: vec![batch, g * h], elem }
            };
            let gate = |p: &mut Planner, v: &Dev, k: usize| narrow(p.eb(), v, 1, k * h, h);
            let gate3 = |p: &mut Planner, v: &Dev, h: usize| narrow(p.eb(), v, 1, 0, 3 * h);
            let clip = |p: &mut Planner, v: Dev| -> crate::Result<Dev> {
                match s.clip {
                    Some(c) => unary(p.eb(), Op::Clamp { min: f64::from(-c), max: f64::from(c) }, &v, elem),
                    None => Ok(v),
                }
            };
            let (hn, cn) = match s.kind {
                "LSTM" if peeps.is_none() && s.clip.is_none() && !s.input_forget => {
                    // The i, o, f gates are the first 3h values of a row: one
                    // activation for the three, one for the cell gate.
                    let pre = binary(p.eb(), BinFn::Add, &xt, &hr, elem)?;
                    let iof = gate3(p, &pre, h)?;
                    let iof = unary(p.eb(), acts[0].clone(), &iof, elem)?;
                    let (i, o, f) = (gate(p, &iof, 0)?, gate(p, &iof, 1)?, gate(p, &iof, 2)?);
                    let cg = gate(p, &pre, 3)?;
                    let c = unary(p.eb(), acts[1].clone(), &cg, elem)?;
                    let fc = binary(p.eb(), BinFn::Mul, &f, &cp, elem)?;
                    let ic = binary(p.eb(), BinFn::Mul, &i, &c, elem)?;
                    let cn = binary(p.eb(), BinFn::Add, &fc, &ic, elem)?;
                    let hc = unary(p.eb(), acts[2].clone(), &cn, elem)?;
                    (binary(p.eb(), BinFn::Mul, &o, &hc, elem)?, Some(cn))
                }
                "LSTM" => {
                    let pre = binary(p.eb(), BinFn::Add, &xt, &hr, elem)?;
                    let (mut ig, mut og, mut fg, cg) = (gate(p, &pre, 0)?, gate(p, &pre, 1)?, gate(p, &pre, 2)?, gate(p, &pre, 3)?);
                    if let Some(pp) = &peeps {
                        let pi = binary(p.eb(), BinFn::Mul, &cp, &pp[0], elem)?;
                        ig = binary(p.eb(), BinFn::Add, &ig, &pi, elem)?;
                        let pf = binary(p.eb(), BinFn::Mul, &cp, &pp[2], elem)?;
                        fg = binary(p.eb(), BinFn::Add, &fg, &pf, elem)?;
                    }
                    let ig = clip(p, ig)?;
                    let i = unary(p.eb(), acts[0].clone(), &ig, elem)?;
                    let f = if s.input_forget {
                        let one = Dev { t: p.b.data([1, 1, 1, 1], vec![1.0])?, shape: vec![], elem };
                        binary(p.eb(), BinFn::Sub, &one, &i, elem)?
                    } else {
                        let fg = clip(p, fg)?;
                        unary(p.eb(), acts[0].clone(), &fg, elem)?
                    };
                    let cg = clip(p, cg)?;
                    let c = unary(p.eb(), acts[1].clone(), &cg, elem)?;
                    let fc = binary(p.eb(), BinFn::Mul, &f, &cp, elem)?;
                    let ic = binary(p.eb(), BinFn::Mul, &i, &c, elem)?;
                    let cn = binary(p.eb(), BinFn::Add, &fc, &ic, elem)?;
                    if let Some(pp) = &peeps {
                        let po = binary(p.eb(), BinFn::Mul, &cn, &pp[1], elem)?;
                        og = binary(p.eb(), BinFn::Add, &og, &po, elem)?;
                    }
                    let og = clip(p, og)?;
                    let o = unary(p.eb(), acts[0].clone(), &og, elem)?;
                    let hc = unary(p.eb(), acts[2].clone(), &cn, elem)?;
                    (binary(p.eb(), BinFn::Mul, &o, &hc, elem)?, Some(cn))
                }
                "GRU" => {
                    let (xz, xr, xh) = (gate(p, &xt, 0)?, gate(p, &xt, 1)?, gate(p, &xt, 2)?);
                    let (hz, hrr, hh) = (gate(p, &hr, 0)?, gate(p, &hr, 1)?, gate(p, &hr, 2)?);
                    let zs = binary(p.eb(), BinFn::Add, &xz, &hz, elem)?;
                    let zs = clip(p, zs)?;
                    let z = unary(p.eb(), acts[0].clone(), &zs, elem)?;
                    let rs = binary(p.eb(), BinFn::Add, &xr, &hrr, elem)?;
                    let rs = clip(p, rs)?;
                    let rg = unary(p.eb(), acts[0].clone(), &rs, elem)?;
                    let pre = if s.lbr {
                        let hh = match &rbh {
                            Some(b) => binary(p.eb(), BinFn::Add, &hh, b, elem)?,
                            None => hh,
                        };
                        let rhh = binary(p.eb(), BinFn::Mul, &rg, &hh, elem)?;
                        binary(p.eb(), BinFn::Add, &xh, &rhh, elem)?
                    } else {
                        // (r * H) R_h^T: the last third of R applied to r * H.
                        let rh = binary(p.eb(), BinFn::Mul, &rg, &hp, elem)?;
                        let rhb = crate::models::onnx::dev::shaped(p.eb(), &rh, [h, batch, 1, 1])?;
                        let rh_t = p.b.view(&rt, [h, h, 1, 1], [4, 4 * h, 4 * h * h, 4 * h * h], 2 * h * h * 4)?;
                        let prod = p.b.op(Op::MulMat, &[rh_t, rhb])?;
                        let prod = Dev { t: prod, shape: vec![batch, h], elem };
                        binary(p.eb(), BinFn::Add, &xh, &prod, elem)?
                    };
                    let pre = clip(p, pre)?;
                    let hc = unary(p.eb(), acts[1].clone(), &pre, elem)?;
                    // (1 - z) * hc + z * H = hc + z * (H - hc)
                    let dlt = binary(p.eb(), BinFn::Sub, &hp, &hc, elem)?;
                    let zd = binary(p.eb(), BinFn::Mul, &z, &dlt, elem)?;
                    (binary(p.eb(), BinFn::Add, &hc, &zd, elem)?, None)
                }
                _ => {
                    let pre = binary(p.eb(), BinFn::Add, &xt, &hr, elem)?;
                    let pre = clip(p, pre)?;
                    (unary(p.eb(), acts[0].clone(), &pre, elem)?, None)
                }
            };
            // Steps past a sequence's length keep the state and output zeros.
            let (hn, cn, yt) = match &lens {
                Some(l) if l.iter().any(|&v| v < seq) => {
                    let m: Vec<f64> = (0..batch).map(|b| (t < l[b]) as i64 as f64).collect();
                    let mt = HTensor::from_f64(Elem::F32, vec![batch, 1], m)?;
                    let md = p.upload_host(&mt, None, DType::F32)?;
                    let keep = |p: &mut Planner, new: &Dev, old: &Dev| -> crate::Result<Dev> {
                        let a = binary(p.eb(), BinFn::Mask, new, &md, elem)?;
                        let b = binary(p.eb(), BinFn::MaskNot, old, &md, elem)?;
                        binary(p.eb(), BinFn::Add, &a, &b, elem)
                    };
                    let yt = binary(p.eb(), BinFn::Mask, &hn, &md, elem)?;
                    let h2 = keep(p, &hn, &hp)?;
                    let c2 = match &cn {
                        Some(c) => Some(keep(p, c, &cp)?),
                        None => None,
                    };
                    (h2, c2, yt)
                }
                _ => (hn.clone(), cn, hn),
            };
            outs[t] = Some(reshape(p.eb(), &yt, vec![1, 1, batch, h])?);
            hp = hn;
            if let Some(c) = cn {
                cp = c;
            }
        }
        // INVARIANT: the loop above set outs[t] for every step t.
        let parts: Vec<Dev> = outs.into_iter().map(|o| o.expect("every step")).collect();
        ys.push(if seq > 0 { concat(p.eb(), &parts, 0)? } else { crate::models::onnx::dev::empty(p.eb(), vec![0, 1, batch, h], elem)? });
        hs.push(reshape(p.eb(), &hp, vec![1, batch, h])?);
        cs.push(reshape(p.eb(), &cp, vec![1, batch, h])?);
    }
    let y = if s.dirs == 2 { concat(p.eb(), &ys, 1)? } else { ys.remove(0) };
    let yh = if s.dirs == 2 { concat(p.eb(), &hs, 0)? } else { hs.remove(0) };
    let yc = if s.dirs == 2 { concat(p.eb(), &cs, 0)? } else { cs.remove(0) };
    let (y, yh, yc) = if layout == 1 {
        (permute(p.eb(), &y, &[2, 0, 1, 3])?, permute(p.eb(), &yh, &[1, 0, 2])?, permute(p.eb(), &yc, &[1, 0, 2])?)
    } else {
        (y, yh, yc)
    };
    let mut outs = vec![Val::D(y), Val::D(yh)];
    if s.kind == "LSTM" {
        outs.push(Val::D(yc));
    }
    Ok(outs)
}
