//! Training losses, evaluated on the host: NegativeLogLikelihoodLoss and
//! SoftmaxCrossEntropyLoss (its optional second output the log-softmax of
//! the scores), with the three reductions, class weights and an ignored
//! label.

use super::common::{harg, hopt, Fold, Lower};
use crate::models::onnx::host::{fmt_shape, HTensor};
use crate::models::onnx::model::OnnxNode;
use anyhow::{bail, ensure};
use std::sync::Arc;

pub fn find(op: &str) -> Option<(Option<Lower>, Option<Fold>)> {
    Some(match op {
        "NegativeLogLikelihoodLoss" => (None, Some(fold_nll)),
        "SoftmaxCrossEntropyLoss" => (None, Some(fold_sce)),
        _ => return None,
    })
}

/// The loss of log-probabilities `x` [N, C, d...] (row-major values) for
/// labels `t` [N, d...]: per sample -x[n, t, d] w[t] (0 for the ignored
/// label), reduced as `reduction` says.
// BOUNDS-FN: shape.len() >= 2 is checked; x holds the nn * c * inner values of shape
// (both callers pass a tensor of that shape), labels hold nn * inner (t.shape == want
// is checked), w holds c (checked) and l < c is checked before x and w are read.
fn nll(n: &OnnxNode, x: &[f64], shape: &[usize], t: &HTensor, w: Option<&HTensor>) -> crate::Result<(Vec<usize>, Vec<f64>)> {
    ensure!(shape.len() >= 2, "the input must have at least 2 dimensions [N, C, ...], not {}", fmt_shape(shape));
    let (nn, c) = (shape[0], shape[1]);
    let inner: usize = shape[2..].iter().product();
    let mut want = vec![nn];
    want.extend_from_slice(&shape[2..]);
    ensure!(t.shape == want, "the labels have shape {}; for input {} they must have {}", fmt_shape(&t.shape), fmt_shape(shape), fmt_shape(&want));
    if let Some(w) = w {
        ensure!(w.shape == [c], "the weights have shape {}; they must have one value per class ({c})", fmt_shape(&w.shape));
    }
    let ignore = n.attrs.get("ignore_index").map(|_| n.int("ignore_index", 0));
    let wv = w.map(|w| w.f64s().into_owned());
    let labels = t.i64s();
    let mut loss = vec![0f64; nn * inner];
    let mut wsum = 0f64;
    for b in 0..nn {
        for i in 0..inner {
            let k = b * inner + i;
            let l = labels[k];
            if Some(l) == ignore {
                continue;
            }
            ensure!(l >= 0 && (l as usize) < c, "label {l} is not one of the {c} classes 0, 1, ... (and not ignore_index)");
            let wt = wv.as_ref().map_or(1.0, |w| w[l as usize]);
            loss[k] = -x[(b * c + l as usize) * inner + i] * wt;
            wsum += wt;
        }
    }
    Ok(match n.string("reduction", "mean").as_str() {
        "none" => (want, loss),
        "sum" => (Vec::new(), vec![loss.iter().sum()]),
        "mean" => (Vec::new(), vec![loss.iter().sum::<f64>() / wsum]),
        other => bail!("reduction '{other}' is not one of none, sum, mean"),
    })
}

fn fold_nll(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _o: i64) -> crate::Result<Vec<HTensor>> {
    let x = harg(ins, 0, "input")?;
    let t = harg(ins, 1, "target")?;
    let (shape, v) = nll(n, &x.f64s(), &x.shape, t, hopt(ins, 2))?;
    Ok(vec![HTensor::from_f64(x.elem, shape, v)?])
}

// BOUNDS-FN: rank >= 2 is checked; v and lp hold the nn * c * inner values of x's shape
// (an HTensor holds numel(shape) values), and at(k) < nn * c * inner for b < nn, k < c,
// i < inner.
fn fold_sce(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _o: i64) -> crate::Result<Vec<HTensor>> {
    let x = harg(ins, 0, "scores")?;
    let t = harg(ins, 1, "labels")?;
    ensure!(x.rank() >= 2, "the scores must have at least 2 dimensions [N, C, ...], not {}", fmt_shape(&x.shape));
    let (nn, c) = (x.shape[0], x.shape[1]);
    let inner: usize = x.shape[2..].iter().product();
    let v = x.f64s();
    // log-softmax over the class dimension.
    let mut lp = vec![0f64; v.len()];
    for b in 0..nn {
        for i in 0..inner {
            let at = |k: usize| (b * c + k) * inner + i;
            let m = (0..c).map(|k| v[at(k)]).fold(f64::NEG_INFINITY, f64::max);
            let s: f64 = (0..c).map(|k| (v[at(k)] - m).exp()).sum();
            let ls = m + s.ln();
            for k in 0..c {
                lp[at(k)] = v[at(k)] - ls;
            }
        }
    }
    let (shape, loss) = nll(n, &lp, &x.shape, t, hopt(ins, 2))?;
    Ok(vec![HTensor::from_f64(x.elem, shape, loss)?, HTensor::from_f64(x.elem, x.shape.clone(), lp)?])
}
