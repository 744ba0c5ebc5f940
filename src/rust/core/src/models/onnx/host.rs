//! Host tensors: N-dimensional values held in memory, row-major (the last
//! dimension fastest, as ONNX lays them out), used for initializers, constant
//! folding and the operators that run on the host.

use super::elem::Elem;
use anyhow::{bail, ensure};
use std::borrow::Cow;

/// Elements beyond which a host tensor is refused (a malformed file could
/// otherwise ask for any size).
pub const MAX_ELEMENTS: usize = 1 << 32;

/// Element values: floating-point types as f64, integers and booleans as i64.
#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    F(Vec<f64>),
    I(Vec<i64>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct HTensor {
    pub elem: Elem,
    pub shape: Vec<usize>,
    pub data: Data,
}

/// Number of elements of `shape`, checked against overflow, [`MAX_ELEMENTS`]
/// and the single-allocation limit (as f64 values on the host).
pub fn numel(shape: &[usize]) -> crate::Result<usize> {
    let mut n: usize = 1;
    for &d in shape {
        n = match n.checked_mul(d) {
            Some(v) if v <= MAX_ELEMENTS => v,
            _ => bail!("a tensor of shape {} is too large ({} elements at most)", fmt_shape(shape), MAX_ELEMENTS),
        };
    }
    crate::base::alloc::check(n, 8, &format!("a tensor of shape {}", fmt_shape(shape)))?;
    Ok(n)
}

/// "[2, 3, 4]" (a scalar is "[]").
pub fn fmt_shape(shape: &[usize]) -> String {
    let parts: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("[{}]", parts.join(", "))
}

/// A vector of `n` copies of `v`, or an error (not an abort) when memory runs out.
pub fn filled<T: Clone>(n: usize, v: T) -> crate::Result<Vec<T>> {
    crate::base::alloc::try_vec(n, v, "host tensor values")
}

/// Row-major strides (in elements) of `shape`.
// BOUNDS-FN: s has shape's length; i + 1 < shape.len() in the loop.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// The shape two shapes broadcast to (numpy rules), or an error showing both.
// BOUNDS-FN: out has length r; a and b are indexed at i + len - r only when that is
// in 0..len (i < r and i + len >= r).
pub fn broadcast_shape(a: &[usize], b: &[usize]) -> crate::Result<Vec<usize>> {
    let r = a.len().max(b.len());
    let mut out = vec![0usize; r];
    for i in 0..r {
        let da = if i + a.len() >= r { a[i + a.len() - r] } else { 1 };
        let db = if i + b.len() >= r { b[i + b.len() - r] } else { 1 };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            bail!(
                "shapes {} and {} cannot be broadcast together: sizes {da} and {db} differ and neither \
                 is 1, so neither repeats to the other",
                fmt_shape(a),
                fmt_shape(b)
            )
        };
    }
    Ok(out)
}

/// For every element of `out` (row-major), the index of the element of a
/// tensor of shape `inp` that broadcasts to it.
// BOUNDS-FN: inp.len() <= r is checked, so k = i + r - inp.len() < r; st, pos and
// out have length r and d < r; ist has inp's length.
pub fn broadcast_index(out: &[usize], inp: &[usize]) -> crate::Result<Vec<usize>> {
    let r = out.len();
    ensure!(inp.len() <= r, "internal: broadcast of rank {} to rank {r}", inp.len());
    let ist = strides(inp);
    let mut st = vec![0usize; r];
    for i in 0..inp.len() {
        let k = i + r - inp.len();
        if inp[i] != 1 {
            ensure!(inp[i] == out[k], "internal: {} does not broadcast to {}", fmt_shape(inp), fmt_shape(out));
            st[k] = ist[i];
        }
    }
    let n = numel(out)?;
    let mut idx = filled(n, 0usize)?;
    let mut pos = vec![0usize; r];
    let mut cur = 0usize;
    for slot in idx.iter_mut() {
        *slot = cur;
        for d in (0..r).rev() {
            pos[d] += 1;
            cur += st[d];
            if pos[d] < out[d] {
                break;
            }
            cur -= st[d] * pos[d];
            pos[d] = 0;
        }
    }
    Ok(idx)
}

/// Normalises an axis in `-rank..rank` (ONNX's negative axes count from the end).
pub fn norm_axis(axis: i64, rank: usize, what: &str) -> crate::Result<usize> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    ensure!((0..r).contains(&a), "{what} {axis} is out of range for a tensor of rank {rank}");
    Ok(a as usize)
}

/// For each element of a tensor of shape `out` (row-major), the flat index
/// given by `f` from its coordinates.
// BOUNDS-FN: pos has out's length and d < out.len().
pub fn index_map(out: &[usize], mut f: impl FnMut(&[usize]) -> usize) -> crate::Result<Vec<usize>> {
    let n = numel(out)?;
    let mut idx = crate::base::alloc::try_with_capacity(n, "tensor indices")?;
    if n == 0 {
        return Ok(idx);
    }
    let mut pos = vec![0usize; out.len()];
    for _ in 0..n {
        idx.push(f(&pos));
        for d in (0..out.len()).rev() {
            pos[d] += 1;
            if pos[d] < out[d] {
                break;
            }
            pos[d] = 0;
        }
    }
    Ok(idx)
}

/// The host transpose: output dimension i is input dimension `perm[i]`.
// BOUNDS-FN: perm is checked to list each of 0..rank once, and shape and st have
// rank entries.
pub fn transpose(t: &HTensor, perm: &[usize]) -> crate::Result<HTensor> {
    let r = t.rank();
    let mut seen = vec![false; r];
    ensure!(
        perm.len() == r && perm.iter().all(|&p| p < r && !std::mem::replace(&mut seen[p], true)),
        "the permutation {perm:?} does not fit a tensor of rank {r}: it must list each of 0 to {} once",
        r.saturating_sub(1)
    );
    let st = strides(&t.shape);
    let out: Vec<usize> = perm.iter().map(|&p| t.shape[p]).collect();
    let idx = index_map(&out, |c| c.iter().zip(perm).map(|(&ci, &p)| ci * st[p]).sum())?;
    t.pick(&idx, out)
}

impl HTensor {
    pub fn from_f64(elem: Elem, shape: Vec<usize>, v: Vec<f64>) -> crate::Result<HTensor> {
        ensure!(numel(&shape)? == v.len(), "internal: {} values for shape {}", v.len(), fmt_shape(&shape));
        let data = if elem.is_float() { Data::F(v) } else { Data::I(v.into_iter().map(|x| x as i64).collect()) };
        Ok(HTensor { elem, shape, data })
    }

    pub fn from_i64(elem: Elem, shape: Vec<usize>, v: Vec<i64>) -> crate::Result<HTensor> {
        ensure!(numel(&shape)? == v.len(), "internal: {} values for shape {}", v.len(), fmt_shape(&shape));
        let data = if elem.is_float() { Data::F(v.into_iter().map(|x| x as f64).collect()) } else { Data::I(v) };
        Ok(HTensor { elem, shape, data })
    }

    /// A 1-D int64 tensor (shapes, axes, indices).
    pub fn ints(v: Vec<i64>) -> HTensor {
        HTensor { elem: Elem::I64, shape: vec![v.len()], data: Data::I(v) }
    }

    pub fn scalar_f(elem: Elem, v: f64) -> HTensor {
        // INVARIANT: a rank-0 shape holds exactly the one value given.
        HTensor::from_f64(elem, Vec::new(), vec![v]).expect("a scalar has one element")
    }

    pub fn numel(&self) -> usize {
        match &self.data {
            Data::F(v) => v.len(),
            Data::I(v) => v.len(),
        }
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// The values as f64 (integers converted).
    pub fn f64s(&self) -> Cow<'_, [f64]> {
        match &self.data {
            Data::F(v) => Cow::Borrowed(v),
            Data::I(v) => Cow::Owned(v.iter().map(|&x| x as f64).collect()),
        }
    }

    /// The values as i64 (floats truncated toward zero).
    pub fn i64s(&self) -> Cow<'_, [i64]> {
        match &self.data {
            Data::I(v) => Cow::Borrowed(v),
            Data::F(v) => Cow::Owned(v.iter().map(|&x| f_to_i(x)).collect()),
        }
    }

    // BOUNDS-FN: callers pass i < numel(): first() and scalar() check numel first;
    // BatchNormalization's fold checks every operand has c values for i < c;
    // attention reads its q * kv structure bias at i * kv + j with i < q, j < kv;
    // ConstantOfShape checks one value.
    pub fn f(&self, i: usize) -> f64 {
        match &self.data {
            Data::F(v) => v[i],
            Data::I(v) => v[i] as f64,
        }
    }

    /// The same values with another shape (same number of elements).
    pub fn reshaped(&self, shape: Vec<usize>) -> crate::Result<HTensor> {
        ensure!(
            numel(&shape)? == self.numel(),
            "cannot reshape a tensor of shape {} ({} elements) to {}",
            fmt_shape(&self.shape),
            self.numel(),
            fmt_shape(&shape)
        );
        Ok(HTensor { shape, ..self.clone() })
    }

    /// Elements picked by `idx` (indices into this tensor), with a new shape.
    /// An index past the end (an index input the checks let through) is an
    /// error, never a panic.
    pub fn pick(&self, idx: &[usize], shape: Vec<usize>) -> crate::Result<HTensor> {
        fn gather<T: Copy>(v: &[T], idx: &[usize]) -> crate::Result<Vec<T>> {
            idx.iter()
                .map(|&i| v.get(i).copied().ok_or_else(|| anyhow::anyhow!("index {i} is past the end of a tensor of {} values", v.len())))
                .collect()
        }
        let data = match &self.data {
            Data::F(v) => Data::F(gather(v, idx)?),
            Data::I(v) => Data::I(gather(v, idx)?),
        };
        Ok(HTensor { elem: self.elem, shape, data })
    }

    /// ONNX `Cast` to `to`: float to integer truncates toward zero and wraps
    /// like a C cast; anything to bool is "not zero"; float to float16 or
    /// bfloat16 rounds to that precision; to the narrow float types it
    /// rounds and saturates.
    pub fn cast(&self, to: Elem) -> HTensor {
        self.cast_sat(to, true)
    }

    /// `cast`, with float8 targets saturating only with `saturate` (Cast's
    /// attribute of that name).
    pub fn cast_sat(&self, to: Elem, saturate: bool) -> HTensor {
        let data = if to.is_float() {
            let v = self.f64s();
            Data::F(v.iter().map(|&x| round_to_sat(to, x, saturate)).collect())
        } else if to == Elem::Bool {
            Data::I(self.f64s().iter().map(|&x| (x != 0.0) as i64).collect())
        } else {
            let v: Vec<i64> = match &self.data {
                Data::I(v) => v.clone(),
                Data::F(v) => v.iter().map(|&x| f_to_i(x)).collect(),
            };
            Data::I(v.into_iter().map(|x| wrap_int(to, x)).collect())
        };
        HTensor { elem: to, shape: self.shape.clone(), data }
    }

    /// The first value (a scalar input such as Clip's bounds or Trilu's
    /// k): an empty tensor from a file is an error.
    pub fn first(&self) -> crate::Result<f64> {
        ensure!(self.numel() > 0, "a scalar input has no values (shape {})", fmt_shape(&self.shape));
        Ok(self.f(0))
    }

    /// The single value of a one-element tensor.
    pub fn scalar(&self, what: &str) -> crate::Result<f64> {
        ensure!(self.numel() == 1, "{what} must have one element, not shape {}", fmt_shape(&self.shape));
        Ok(self.f(0))
    }
}

/// f64 to i64 truncating toward zero (NaN to 0, saturating at the ends).
pub fn f_to_i(x: f64) -> i64 {
    x as i64
}

/// A value rounded to the precision of float type `t` (the narrow types
/// saturating).
pub fn round_to(t: Elem, x: f64) -> f64 {
    round_to_sat(t, x, true)
}

/// A value rounded to float type `t`; out of range values of the float8
/// types saturate only with `saturate`.
pub fn round_to_sat(t: Elem, x: f64, saturate: bool) -> f64 {
    match t {
        Elem::F32 => x as f32 as f64,
        Elem::F16 => half::f16::from_f64(x).to_f64(),
        Elem::BF16 => half::bf16::from_f64(x).to_f64(),
        t if t.is_narrow() => super::lowp::round(t, x as f32 as f64, saturate),
        _ => x,
    }
}

/// An integer reduced to integer type `t` as a two's-complement cast does.
pub fn wrap_int(t: Elem, x: i64) -> i64 {
    match t {
        Elem::U8 => x as u8 as i64,
        Elem::I8 => x as i8 as i64,
        Elem::U16 => x as u16 as i64,
        Elem::I16 => x as i16 as i64,
        Elem::I32 => x as i32 as i64,
        Elem::U32 => x as u32 as i64,
        Elem::Bool => (x != 0) as i64,
        Elem::U4 => x & 0xf,
        Elem::I4 => ((x & 0xf) ^ 8) - 8,
        Elem::U2 => x & 0x3,
        Elem::I2 => ((x & 0x3) ^ 2) - 2,
        _ => x,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting() {
        assert_eq!(broadcast_shape(&[2, 1, 4], &[3, 1]).unwrap(), vec![2, 3, 4]);
        assert!(broadcast_shape(&[2, 3], &[4]).is_err());
        assert_eq!(broadcast_index(&[2, 3], &[3]).unwrap(), vec![0, 1, 2, 0, 1, 2]);
        assert_eq!(broadcast_index(&[2, 3], &[2, 1]).unwrap(), vec![0, 0, 0, 1, 1, 1]);
        assert_eq!(broadcast_index(&[2, 2], &[]).unwrap(), vec![0; 4]);
    }

    #[test]
    fn sizes_are_checked() {
        assert!(numel(&[1 << 20, 1 << 20]).is_err());
        assert!(numel(&[usize::MAX, 2]).is_err());
        assert_eq!(numel(&[]).unwrap(), 1);
        assert_eq!(strides(&[2, 3, 4]), vec![12, 4, 1]);
        assert_eq!(norm_axis(-1, 3, "axis").unwrap(), 2);
        assert!(norm_axis(3, 3, "axis").is_err());
    }

    /// A constant folded through Transpose with a permutation from the
    /// file: an axis listed twice or past the rank is an error.
    #[test]
    fn transpose_checks_its_permutation() {
        let t = HTensor::from_f64(Elem::F32, vec![2, 3], (0..6).map(f64::from).collect()).unwrap();
        assert_eq!(transpose(&t, &[1, 0]).unwrap().f64s().to_vec(), vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
        for bad in [&[0usize, 0][..], &[1, 2], &[0], &[0, 1, 2]] {
            let e = transpose(&t, bad).unwrap_err().to_string();
            assert!(e.contains("each of 0 to 1 once"), "{bad:?}: {e}");
        }
    }

    /// Scalar inputs and gathers from a file: an empty tensor or an index
    /// past the end is an error.
    #[test]
    fn empty_scalars_and_far_indices_are_errors() {
        let empty = HTensor::from_f64(Elem::F32, vec![0], vec![]).unwrap();
        assert!(empty.first().unwrap_err().to_string().contains("no values"));
        let t = HTensor::from_f64(Elem::F32, vec![3], vec![1.0, 2.0, 3.0]).unwrap();
        assert_eq!(t.first().unwrap(), 1.0);
        assert_eq!(t.pick(&[2, 0], vec![2]).unwrap().f64s().to_vec(), vec![3.0, 1.0]);
        assert!(t.pick(&[3], vec![1]).unwrap_err().to_string().contains("past the end"));
        assert!(HTensor::ints(vec![4, 5]).pick(&[9], vec![1]).is_err());
    }

    #[test]
    fn casts() {
        let t = HTensor::from_f64(Elem::F32, vec![4], vec![-1.7, 0.0, 2.5, 300.0]).unwrap();
        assert_eq!(t.cast(Elem::I64).i64s().to_vec(), vec![-1, 0, 2, 300]);
        assert_eq!(t.cast(Elem::U8).i64s().to_vec(), vec![255, 0, 2, 44]);
        assert_eq!(t.cast(Elem::Bool).i64s().to_vec(), vec![1, 0, 1, 1]);
        assert_eq!(HTensor::scalar_f(Elem::F32, 0.1).cast(Elem::F16).f(0), half::f16::from_f64(0.1).to_f64());
    }
}
