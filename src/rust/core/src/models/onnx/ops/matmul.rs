//! Matrix products: MatMul (numpy batching and broadcasting) and Gemm, on
//! the engine's `mul_mat`. Constant right-hand sides (weights) are
//! transposed once on the host and kept in the persistent pool.

use super::common::{arg, derived_key, harg, hopt, one, opt, Fold, Lower};
use crate::base::dtype::DType;
use crate::models::onnx::dev::{self, binary, expand, ne_of, permute, unary};
use crate::models::onnx::elem::Elem;
use crate::models::onnx::host::{self, broadcast_shape, fmt_shape, HTensor};
use crate::models::onnx::model::OnnxNode;
use crate::models::onnx::plan::Planner;
use crate::models::onnx::val::{Dev, Val};
use crate::op::{BinFn, Op};
use anyhow::ensure;
use std::sync::Arc;

pub fn find(op: &str) -> Option<(Option<Lower>, Option<Fold>)> {
    Some(match op {
        "MatMul" => (Some(lower_matmul), Some(fold_matmul)),
        "Gemm" => (Some(lower_gemm), Some(fold_gemm)),
        _ => return None,
    })
}

/// Weights at least this large are stored in f16 with `dtype = "f16"`.
pub const F16_MIN: usize = 256;

/// `b` transposed in its last two dimensions, as an engine tensor with
/// ggml sizes `ne` (a constant is transposed on the host and kept).
fn transposed(p: &mut Planner, b: &Val, ne: [usize; 4]) -> crate::Result<Arc<crate::tensor::Tensor>> {
    let r = b.shape().len();
    let mut perm: Vec<usize> = (0..r).collect();
    // A 1-D `b` (a column [K, 1]) transposed holds the same values in the
    // same order: its permutation stays the identity.
    if r >= 2 {
        perm.swap(r - 1, r - 2);
    }
    match b {
        Val::C(c) => {
            let key = derived_key("T", &[b]);
            let dtype = if p.b.f16 && c.shape().iter().product::<usize>() >= F16_MIN { DType::F16 } else { DType::F32 };
            let c2 = c.clone();
            p.b.constant(key.as_deref(), dtype, ne, move || {
                let t = host::transpose(&*c2.value()?, &perm)?;
                Ok(t.f64s().iter().map(|&x| x as f32).collect())
            })
        }
        Val::D(d) => {
            let t = permute(p.eb(), d, &perm)?;
            dev::shaped(p.eb(), &t, ne)
        }
    }
}

/// ONNX MatMul of `a` [.., M, K] and `b` [.., K, N].
// BOUNDS-FN: sa and sb are checked non-empty, so a2 and b2 have rank 2 or more; batch
// has r entries and ba, bb are aligned to r; groups has at least two entries after the
// while loop.
pub fn matmul(p: &mut Planner, a: &Val, b: &Val) -> crate::Result<Dev> {
    let (sa, sb) = (a.shape().to_vec(), b.shape().to_vec());
    ensure!(!sa.is_empty() && !sb.is_empty(), "MatMul needs tensors of rank 1 or more, not {} and {}", fmt_shape(&sa), fmt_shape(&sb));
    // 1-D operands: a row (A) or a column (B), dropped from the result.
    let a2: Vec<usize> = if sa.len() == 1 { vec![1, sa[0]] } else { sa.clone() };
    let b2: Vec<usize> = if sb.len() == 1 { vec![sb[0], 1] } else { sb.clone() };
    let (m, k) = (a2[a2.len() - 2], a2[a2.len() - 1]);
    let (k2, n) = (b2[b2.len() - 2], b2[b2.len() - 1]);
    ensure!(
        k == k2,
        "MatMul of shapes {} and {}: the inner dimensions differ ({k} and {k2})",
        fmt_shape(&sa),
        fmt_shape(&sb)
    );
    let (ba, bb) = (&a2[..a2.len() - 2], &b2[..b2.len() - 2]);
    let batch = broadcast_shape(ba, bb)?;
    let r = batch.len();
    let align = |s: &[usize]| -> Vec<usize> {
        let mut v = vec![1usize; r - s.len()];
        v.extend_from_slice(s);
        v
    };
    let (ba, bb) = (align(ba), align(bb));
    // The left operand carries the full batch; the right one may be
    // broadcast in at most two groups of batch dimensions.
    let mut groups: Vec<(usize, bool)> = Vec::new(); // (size, b present)
    for i in 0..r {
        if batch[i] == 1 {
            continue;
        }
        let present = bb[i] == batch[i];
        match groups.last_mut() {
            Some(g) if g.1 == present => g.0 *= batch[i],
            _ => groups.push((batch[i], present)),
        }
    }
    let mut bval = b.clone();
    let mut bb_eff = bb.clone();
    if groups.len() > 2 {
        let mut full = batch.clone();
        full.extend_from_slice(&[k, n]);
        let d = p.dev(b)?;
        let d = dev::reshape(p.eb(), &d, [bb.clone(), vec![k, n]].concat())?;
        bval = Val::D(expand(p.eb(), &d, &full)?);
        bb_eff = batch.clone();
        groups = vec![(batch.iter().product(), true)];
    }
    while groups.len() < 2 {
        groups.insert(0, (1, true));
    }
    let (g_out, g_in) = (groups[0], groups[1]);
    // A: [K, M, g_in, g_out]
    let ad = p.dev(a)?;
    let mut full_a = batch.clone();
    full_a.extend_from_slice(&[m, k]);
    let ad = dev::reshape(p.eb(), &ad, [ba.clone(), vec![m, k]].concat())?;
    let ad = if ba != batch { expand(p.eb(), &ad, &full_a)? } else { ad };
    let at = dev::shaped(p.eb(), &ad, [k, m, g_in.0, g_out.0])?;
    // B^T: [K, N, g_in or 1, g_out or 1]
    let bne = [k, n, if g_in.1 { g_in.0 } else { 1 }, if g_out.1 { g_out.0 } else { 1 }];
    let bshape: Vec<usize> = [bb_eff.clone(), vec![k, n]].concat();
    let bv = match &bval {
        Val::D(d) => Val::D(dev::reshape(p.eb(), d, bshape)?),
        Val::C(_) => bval.clone(),
    };
    let bt = transposed(p, &bv, bne)?;
    let t = p.b.op(Op::MulMat, &[bt, at])?;
    let mut out = batch;
    if sa.len() > 1 {
        out.push(m);
    }
    if sb.len() > 1 {
        out.push(n);
    }
    let t = p.b.reshape(&t, ne_of(&out))?;
    Ok(Dev { t, shape: out, elem: super::common::float_result(a.elem()) })
}

fn lower_matmul(p: &mut Planner, _n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let (a, b) = (arg(ins, 0, "A")?.clone(), arg(ins, 1, "B")?.clone());
    one(matmul(p, &a, &b)?)
}

/// Host MatMul (numpy semantics), f64.
// BOUNDS-FN: sa and sb are checked non-empty, so a2 and b2 have rank 2 or more; x holds
// numel(a2) values and pa < numel of a's batch (broadcast_index), i < m, l < k;
// likewise y with pb, l, j.
pub fn host_matmul(a: &HTensor, b: &HTensor) -> crate::Result<HTensor> {
    let (sa, sb) = (a.shape.clone(), b.shape.clone());
    ensure!(!sa.is_empty() && !sb.is_empty(), "MatMul needs tensors of rank 1 or more, not {} and {}", fmt_shape(&sa), fmt_shape(&sb));
    let a2 = if sa.len() == 1 { vec![1, sa[0]] } else { sa.clone() };
    let b2 = if sb.len() == 1 { vec![sb[0], 1] } else { sb.clone() };
    let (m, k) = (a2[a2.len() - 2], a2[a2.len() - 1]);
    let (k2, n) = (b2[b2.len() - 2], b2[b2.len() - 1]);
    ensure!(k == k2, "MatMul of shapes {} and {}: the inner dimensions differ", fmt_shape(&sa), fmt_shape(&sb));
    let batch = broadcast_shape(&a2[..a2.len() - 2], &b2[..b2.len() - 2])?;
    let ia = host::broadcast_index(&batch, &a2[..a2.len() - 2])?;
    let ib = host::broadcast_index(&batch, &b2[..b2.len() - 2])?;
    let (x, y) = (a.f64s(), b.f64s());
    let mut out = Vec::with_capacity(ia.len() * m * n);
    for (&pa, &pb) in ia.iter().zip(&ib) {
        for i in 0..m {
            for j in 0..n {
                let mut s = 0.0;
                for l in 0..k {
                    s += x[pa * m * k + i * k + l] * y[pb * k * n + l * n + j];
                }
                out.push(s);
            }
        }
    }
    let mut shape = batch;
    if sa.len() > 1 {
        shape.push(m);
    }
    if sb.len() > 1 {
        shape.push(n);
    }
    let elem = if a.elem.is_float() { a.elem } else { a.elem };
    if elem.is_float() {
        HTensor::from_f64(elem, shape, out)
    } else {
        HTensor::from_i64(elem, shape, out.iter().map(|&v| v as i64).collect())
    }
}

fn fold_matmul(_n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _o: i64) -> crate::Result<Vec<HTensor>> {
    Ok(vec![host_matmul(harg(ins, 0, "A")?, harg(ins, 1, "B")?)?])
}

// BOUNDS-FN: rank 2 of A and B is checked first.
fn lower_gemm(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let (a, b) = (arg(ins, 0, "A")?.clone(), arg(ins, 1, "B")?.clone());
    ensure!(a.shape().len() == 2 && b.shape().len() == 2, "Gemm needs 2-D A and B, not {} and {}", fmt_shape(a.shape()), fmt_shape(b.shape()));
    let (ta, tb) = (n.int("transA", 0) != 0, n.int("transB", 0) != 0);
    let (alpha, beta) = (n.float("alpha", 1.0), n.float("beta", 1.0));
    let (m, k) = if ta { (a.shape()[1], a.shape()[0]) } else { (a.shape()[0], a.shape()[1]) };
    let (k2, nn) = if tb { (b.shape()[1], b.shape()[0]) } else { (b.shape()[0], b.shape()[1]) };
    ensure!(k == k2, "Gemm: A gives K = {k} but B gives {k2}");
    // engine a = B'^T as [K, N]: B itself when transB.
    let bt = if tb {
        match &b {
            Val::C(c) => {
                let dtype = if p.b.f16 && c.shape().iter().product::<usize>() >= F16_MIN { DType::F16 } else { DType::F32 };
                p.upload(c, dtype)?
            }
            Val::D(d) => dev::shaped(p.eb(), d, [k, nn, 1, 1])?,
        }
    } else {
        transposed(p, &b, [k, nn, 1, 1])?
    };
    // engine b = A' as [K, M].
    let ad = p.dev(&a)?;
    let ad = if ta { permute(p.eb(), &ad, &[1, 0])? } else { ad };
    let at = dev::shaped(p.eb(), &ad, [k, m, 1, 1])?;
    let t = p.b.op(Op::MulMat, &[bt, at])?;
    let elem = super::common::float_result(a.elem());
    let mut y = Dev { t, shape: vec![m, nn], elem };
    if alpha != 1.0 {
        y = unary(p.eb(), Op::Scale { s: f64::from(alpha) }, &y, elem)?;
    }
    if let Some(c) = opt(ins, 2) {
        if beta != 0.0 {
            let mut cd = p.dev(c)?;
            if beta != 1.0 {
                cd = unary(p.eb(), Op::Scale { s: f64::from(beta) }, &cd, elem)?;
            }
            y = binary(p.eb(), BinFn::Add, &y, &cd, elem)?;
        }
    }
    one(y)
}

// BOUNDS-FN: idx indexes c (broadcast_index of c's shape) and has y's numel entries, as
// v does.
fn fold_gemm(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _o: i64) -> crate::Result<Vec<HTensor>> {
    let (a, b) = (harg(ins, 0, "A")?, harg(ins, 1, "B")?);
    let a = if n.int("transA", 0) != 0 { host::transpose(a, &[1, 0])? } else { a.clone() };
    let b = if n.int("transB", 0) != 0 { host::transpose(b, &[1, 0])? } else { b.clone() };
    let y = host_matmul(&a, &b)?;
    let (alpha, beta) = (n.float("alpha", 1.0) as f64, n.float("beta", 1.0) as f64);
    let mut v: Vec<f64> = y.f64s().iter().map(|&x| x * alpha).collect();
    if let Some(c) = hopt(ins, 2) {
        let idx = host::broadcast_index(&y.shape, &c.shape)?;
        let cv = c.f64s();
        for (o, &i) in v.iter_mut().zip(&idx) {
            *o += beta * cv[i];
        }
    }
    Ok(vec![HTensor::from_f64(if a.elem.is_float() { a.elem } else { Elem::F32 }, y.shape, v)?])
}
