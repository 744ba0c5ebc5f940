//! BinaryOp: elementwise arithmetic with a scalar or a broadcast second blob.
//! A lower-dimensional operand aligns with the outer axes of the other one;
//! a 1-d operand whose length is not the other's outermost extent aligns with w.

use crate::ncnn::{Layer, Mat, Opt, ParamDict};
use crate::ncnn_bail;
use crate::ncnn::par;

pub struct BinaryOp {
    op: i32,
    with_scalar: bool,
    b: f32,
}

impl BinaryOp {
    pub fn new(pd: &ParamDict) -> anyhow::Result<BinaryOp> {
        let op = pd.int(0, 0);
        if !(0..=11).contains(&op) {
            ncnn_bail!("BinaryOp op_type {op} is not 0 to 11");
        }
        Ok(BinaryOp {
            op,
            with_scalar: pd.int(1, 0) != 0,
            b: pd.float(2, 0.0),
        })
    }
}

#[inline]
fn apply(op: i32, a: f32, b: f32) -> f32 {
    match op {
        0 => a + b,
        1 => a - b,
        2 => a * b,
        3 => a / b,
        4 => a.max(b),
        5 => a.min(b),
        6 => a.powf(b),
        7 => b - a,
        8 => b / a,
        9 => b.powf(a),
        10 => a.atan2(b),
        _ => b.atan2(a),
    }
}

/// `o[i] = op(o[i], b[i])` (or op(o[i], scalar) with `b` empty), with the
/// common ops in their own loops so that they vectorise.
fn apply_all(op: i32, o: &mut [f32], b: &[f32], scalar: f32) {
    fn run(o: &mut [f32], b: &[f32], s: f32, f: impl Fn(f32, f32) -> f32) {
        crate::base::simd::wide(|| {
            if b.is_empty() {
                o.iter_mut().for_each(|x| *x = f(*x, s));
            } else {
                o.iter_mut().zip(b).for_each(|(x, y)| *x = f(*x, *y));
            }
        })
    }
    match op {
        0 => run(o, b, scalar, |x, y| x + y),
        1 => run(o, b, scalar, |x, y| x - y),
        2 => run(o, b, scalar, |x, y| x * y),
        3 => run(o, b, scalar, |x, y| x / y),
        7 => run(o, b, scalar, |x, y| y - x),
        _ => run(o, b, scalar, |x, y| apply(op, x, y)),
    }
}

/// Outermost-first extents of `m` padded to `n` axes, aligned against `other`.
// BOUNDS-FN: ax.len() < n here, so either end of out holds it.
fn aligned(m: &Mat, other: &Mat, n: usize) -> Vec<usize> {
    let ax = m.axes();
    let mut out = vec![1; n];
    if ax.len() >= n {
        return ax;
    }
    let outer_first = !(m.dims == 1 && other.axes().first() != Some(&m.w));
    if outer_first {
        out[..ax.len()].copy_from_slice(&ax);
    } else {
        out[n - ax.len()..].copy_from_slice(&ax);
    }
    out
}

impl Layer for BinaryOp {
    fn one_blob_only(&self) -> bool {
        self.with_scalar
    }
    // Bounds: equal shapes share their length, chunk i of out is o.len() values
    // from i * 16384; otherwise aa and ba are a's and b's own extents padded with
    // 1s to n (dims 1 to 4, checked), so their strides keep ia + m and ib + m inside
    // a.data and b.data (a stride-0 side reads one value), and i < n everywhere.
    // BOUNDS-FN: every index is in range as said just above.
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let op = self.op;
        if self.with_scalar {
            let mut a = crate::ncnn::layer::one(bottoms, "BinaryOp")?;
            let b = self.b;
            par::chunks_mut(&mut a.data, 16384, |_, c| apply_all(op, c, &[], b));
            return Ok(vec![a]);
        }
        let n = bottoms.len();
        let Ok([a, b]) = <[Mat; 2]>::try_from(bottoms) else {
            ncnn_bail!("BinaryOp without with_scalar needs two bottom blobs, got {n}");
        };
        if a.shape_eq(&b) {
            let mut out = a;
            let bd: &[f32] = &b.data;
            par::chunks_mut(&mut out.data, 16384, |i, o| {
                apply_all(op, o, &bd[i * 16384..i * 16384 + o.len()], 0.0)
            });
            return Ok(vec![out]);
        }
        if !(1..=4).contains(&a.dims) || !(1..=4).contains(&b.dims) {
            ncnn_bail!("BinaryOp takes blobs of 1 to 4 dimensions, got {} and {}", a.describe(), b.describe());
        }
        let n = a.dims.max(b.dims);
        let aa = aligned(&a, &b, n);
        let ba = aligned(&b, &a, n);
        let mut oa = vec![0; n];
        for i in 0..n {
            if aa[i] != ba[i] && aa[i] != 1 && ba[i] != 1 {
                ncnn_bail!(
                    "BinaryOp cannot broadcast shapes {} and {}",
                    a.describe(),
                    b.describe()
                );
            }
            oa[i] = aa[i].max(ba[i]);
        }
        let strides = |e: &[usize]| {
            let mut s = vec![0; n];
            let mut acc = 1;
            for i in (0..n).rev() {
                s[i] = if e[i] == 1 { 0 } else { acc };
                acc *= e[i];
            }
            s
        };
        let (sa, sb) = (strides(&aa), strides(&ba));
        if aa == oa && !a.data.is_shared() {
            return Ok(vec![in_place(op, a, &b, &oa, &sb)?]);
        }
        let total: usize = oa.iter().product();
        let mut data = crate::ncnn::mat::take_vec(total);
        data.resize(total, 0.0);
        let inner = oa[n - 1];
        par::chunks_mut(&mut data, inner, |r, row| {
            // decompose r over the outer n-1 axes
            let (mut ia, mut ib, mut rem) = (0, 0, r);
            for i in (0..n - 1).rev() {
                let k = rem % oa[i];
                rem /= oa[i];
                ia += k * sa[i];
                ib += k * sb[i];
            }
            // Along the row each operand is contiguous (stride 1) or one
            // value (stride 0): a copy or a fill, then the vectorised op.
            let m = row.len();
            match (sa[n - 1], sb[n - 1]) {
                (1, 1) => {
                    row.copy_from_slice(&a.data[ia..ia + m]);
                    apply_all(op, row, &b.data[ib..ib + m], 0.0);
                }
                (1, _) => {
                    row.copy_from_slice(&a.data[ia..ia + m]);
                    apply_all(op, row, &[], b.data[ib]);
                }
                (_, 1) => {
                    row.fill(a.data[ia]);
                    apply_all(op, row, &b.data[ib..ib + m], 0.0);
                }
                _ => row.fill(apply(op, a.data[ia], b.data[ib])),
            }
        });
        Ok(vec![Mat::from_axes(&oa, data)?])
    }
}

/// `op(a, b)` into `a`'s own data when `a` has the output's extents `oa`
/// (outermost first) and no other blob shares it (a squeeze-excitation
/// scale of every channel, for one). The trailing axes along which `b` is
/// one value are taken as one run.
// Bounds: a holds oa's product of values (aa == oa); r counts runs of `inner`
// over the k outer axes, decomposed into k < n indices each below oa[i]; ib
// sums index times b's stride (zero where b is 1), so ib + m <= b.data.len()
// when b is contiguous along the run and ib < b.data.len() otherwise.
// BOUNDS-FN: every index is in range as said just above.
fn in_place(op: i32, a: Mat, b: &Mat, oa: &[usize], sb: &[usize]) -> anyhow::Result<Mat> {
    let n = oa.len();
    // Trailing axes where b is one value (stride 0) form one run.
    let bcast = sb.iter().rev().take_while(|&&s| s == 0).count();
    let k = if bcast > 0 { n - bcast } else { n - 1 };
    let inner: usize = oa[k..].iter().product();
    let scalar = bcast > 0;
    let mut data = a.data;
    let bd: &[f32] = &b.data;
    if inner > 0 {
        par::chunks_mut(&mut data, inner, |r, row| {
            let (mut ib, mut rem) = (0, r);
            for i in (0..k).rev() {
                ib += (rem % oa[i]) * sb[i];
                rem /= oa[i];
            }
            if scalar {
                apply_all(op, row, &[], bd[ib]);
            } else {
                apply_all(op, row, &bd[ib..ib + row.len()], 0.0);
            }
        });
    }
    let mut out = Mat::from_axes(oa, data)?;
    out.int8 = false;
    Ok(out)
}
