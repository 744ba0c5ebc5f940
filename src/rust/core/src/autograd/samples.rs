//! A training set held once in f32, one column per sample, so that every
//! mini-batch of a fit is a copy of whole columns (no conversion from R's
//! doubles per step).
//!
//! The caller's data is R's array `[n, d1, ..., dk]` (sample index fastest);
//! a sample's column holds its values with the LAST dimension fastest (the
//! channels-first order the models use: `[dk, ..., d1]`). It is transposed
//! and converted in one pass over blocks of samples, checking for missing
//! values as it goes. The memory is counted by the ledger (host memory, tag
//! `cpu`) and released with the value.

use super::value::{EngineVal, Place};
use crate::base::dtype::DType;
use crate::memory::{ledger, BufferTag};
use crate::residency::{self, Scope};
use anyhow::{bail, ensure, Result};
use rayon::prelude::*;

/// Samples converted once: `cols` columns of `rows` f32 values.
#[derive(Debug)]
pub struct Samples {
    pub rows: usize,
    pub cols: usize,
    data: Vec<f32>,
}

/// Samples per block of the transposition: 64 doubles (eight cache lines)
/// per feature read, and the block's columns stay in the L2 cache.
const BLOCK: usize = 64;

/// Features per pass over a block's samples: 16 f32, one cache line of
/// each sample's column.
const FEATURES: usize = 16;

/// Values from which the blocks are converted on the thread pool.
const PAR_VALUES: usize = 1 << 18;

impl Samples {
    /// The `n` samples of `src` (R's array `[n, dims...]`, column-major).
    // BOUNDS-FN: `idx` has k = dims.len() entries and a < k; idx[a] stays
    // below dims[a] (reset to 0 on reaching it), so each o < rows and
    // offs[f] = o n <= (rows - 1) n. src.len() = data.len() = rows n
    // (checked); block `blk` holds b = dst.len() / rows whole samples
    // i0..i0 + b <= n, so o + i0 + j < rows n and j rows + f < dst.len()
    // for every feature f = f0 + (its place in `fo`) < rows.
    pub fn from_array(src: &[f64], n: usize, dims: &[usize]) -> Result<Samples> {
        ensure!(n > 0 && !dims.is_empty(), "the data needs at least one sample and one dimension");
        let rows = dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        let rows = match rows {
            Some(r) if r > 0 => r,
            _ => bail!("the sample dimensions {dims:?} hold no values (or too many)"),
        };
        ensure!(
            rows.checked_mul(n) == Some(src.len()),
            "the data has {} values, not {n} samples of {rows}",
            src.len()
        );
        // offs[f]: where feature f of sample 0 is in `src` (features in the
        // column's order: the last dimension fastest).
        let mut offs = Vec::with_capacity(rows);
        let k = dims.len();
        let mut idx = vec![0usize; k];
        for _ in 0..rows {
            let mut o = 0usize;
            for a in (0..k).rev() {
                o = o * dims[a] + idx[a];
            }
            offs.push(o * n);
            // The next multi-index, the last dimension fastest.
            for a in (0..k).rev() {
                idx[a] += 1;
                if idx[a] < dims[a] {
                    break;
                }
                idx[a] = 0;
            }
        }
        let bytes = src.len() * 4;
        let mut data = crate::base::alloc::try_vec(src.len(), 0f32, "the training data in f32")?;
        let fill = |(blk, dst): (usize, &mut [f32])| -> Result<()> {
            let i0 = blk * BLOCK;
            let b = dst.len() / rows;
            let mut nan = false;
            // FEATURES features at a time: each sample's run of them is one
            // cache line written whole, read from as many streams.
            for (t, fo) in offs.chunks(FEATURES).enumerate() {
                let f0 = t * FEATURES;
                for j in 0..b {
                    let at = j * rows + f0;
                    for (d, &o) in dst[at..at + fo.len()].iter_mut().zip(fo) {
                        let v = src[o + i0 + j];
                        nan |= v.is_nan();
                        *d = v as f32;
                    }
                }
            }
            if nan {
                let j = (0..b).find(|&j| offs.iter().any(|&o| src[o + i0 + j].is_nan())).unwrap_or(0);
                bail!("sample {} holds a missing value", i0 + j + 1);
            }
            Ok(())
        };
        // The loads wait on memory: two cores keep twice as many in flight.
        if src.len() >= PAR_VALUES {
            data.par_chunks_mut(BLOCK * rows).enumerate().try_for_each(fill)?;
        } else {
            data.chunks_mut(BLOCK * rows).enumerate().try_for_each(fill)?;
        }
        ledger::after_alloc(bytes, BufferTag::Cpu);
        Ok(Samples { rows, cols: n, data })
    }

    /// Columns `cols` (0-based) as a `[rows, cols.len()]` f32 value in the
    /// pass pool.
    pub fn batch(&self, cols: &[usize]) -> Result<EngineVal> {
        ensure!(!cols.is_empty(), "a batch needs at least one sample");
        if let Some(bad) = cols.iter().find(|&&j| j >= self.cols) {
            bail!("sample {} of a batch is outside the data's {}", bad + 1, self.cols);
        }
        let r = self.rows;
        let mut bytes = Vec::with_capacity(r * cols.len() * 4);
        for &j in cols {
            // BOUNDS: j < self.cols, checked above, and `data` holds cols * rows
            // values (made so by `from_array`, never resized).
            bytes.extend(self.data[j * r..(j + 1) * r].iter().flat_map(|v| v.to_ne_bytes()));
        }
        let mut st = residency::state();
        ledger::check_budget(bytes.len() as u64, "a training batch")?;
        let ctx = st.ctx_ensure(1, Scope::Pass)?;
        let t = ctx.new_tensor(DType::F32, &[r, cols.len()])?;
        st.ctx_flush(&ctx, Scope::Pass)?;
        drop(st);
        crate::tensor::io::set_bytes(&t, &bytes, 0)?;
        Ok(EngineVal::new(t, r, cols.len(), Place::Pools))
    }
}

impl Drop for Samples {
    fn drop(&mut self) {
        ledger::released(self.data.len() * 4, BufferTag::Cpu);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_transpose_channels_first_and_batch() {
        let _g = ledger::tests::serial();
        // x[n = 2, 2, 3]: x[i, a, b] = 100 i + 10 a + b (0-based).
        let (n, d) = (2usize, [2usize, 3]);
        let mut src = vec![0.0; 12];
        for i in 0..n {
            for a in 0..d[0] {
                for b in 0..d[1] {
                    src[i + n * (a + d[0] * b)] = (100 * i + 10 * a + b) as f64;
                }
            }
        }
        let s = Samples::from_array(&src, n, &d).unwrap();
        assert_eq!((s.rows, s.cols), (6, 2));
        // Column of sample 1: the last dimension (b) fastest.
        let want1: Vec<f32> = (0..2).flat_map(|a| (0..3).map(move |b| (100 + 10 * a + b) as f32)).collect();
        assert_eq!(&s.data[6..], want1.as_slice());
        super::super::reset_pools(&Scope::BOTH, Some(1.0)).unwrap();
        residency::state().set_backend(Some(std::sync::Arc::new(crate::backend::Backend::cpu())));
        let v = s.batch(&[1, 0, 1]).unwrap();
        let got = v.download().unwrap().data;
        let mut want: Vec<f64> = want1.iter().map(|&v| v as f64).collect();
        want.extend(s.data[..6].iter().map(|&v| v as f64));
        want.extend(want1.iter().map(|&v| v as f64));
        assert_eq!(got, want);
        assert!(s.batch(&[2]).unwrap_err().to_string().contains("outside"));
        let mut bad = src.clone();
        bad[3] = f64::NAN;
        assert!(Samples::from_array(&bad, n, &d).unwrap_err().to_string().contains("sample 2"));
        assert!(Samples::from_array(&src, 3, &d).is_err());
        assert!(Samples::from_array(&src, n, &[0, 3]).is_err());
        super::super::reset_pools(&Scope::BOTH, None).unwrap();
    }
}
