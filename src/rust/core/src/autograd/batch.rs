//! A mini-batch straight from the caller's data: the columns of a
//! column-major f64 matrix (R's own memory) picked by index and written
//! into a new engine value in one pass, with no host copy between. On
//! "cpu" each column is one copy into the f64 tensor (whose buffer is a
//! spare one of the previous step's size: `place::cpu_buffer`); on "gpu"
//! the columns are converted to f32 into one staging block while they are
//! gathered, and uploaded into the pass pool with one write.

use super::place::cpu_alloc;
use super::value::{EngineVal, Place};
use crate::base::dtype::DType;
use crate::residency::{self, Scope};
use crate::tensor::{Context, TENSOR_OVERHEAD};
use anyhow::{ensure, Result};

/// Columns `cols` (0-based) of the `rows`-row column-major matrix `src`, as
/// a `[rows, cols.len()]` value in `place`.
pub fn columns(src: &[f64], rows: usize, cols: &[usize], place: Place) -> Result<EngineVal> {
    ensure!(rows > 0 && !cols.is_empty(), "a batch needs at least one row and one column");
    ensure!(src.len() % rows == 0, "internal: {} values are not whole columns of {rows}", src.len());
    let n = src.len() / rows;
    if let Some(bad) = cols.iter().find(|&&j| j >= n) {
        anyhow::bail!("column {} of a batch is outside the data's {n} columns", bad + 1);
    }
    // BOUNDS: every j in `cols` is < n (checked above) and n * rows is
    // src.len() (whole columns, checked above), so (j + 1) * rows <= src.len().
    let col = |j: usize| &src[j * rows..(j + 1) * rows];
    let shape = [rows, cols.len()];
    let t = match place {
        Place::Cpu => {
            let ctx = Context::new(TENSOR_OVERHEAD, true)?;
            let t = ctx.new_tensor(DType::F64, &shape)?;
            cpu_alloc(&t)?;
            for (k, &j) in cols.iter().enumerate() {
                crate::tensor::io::set_values(&t, col(j), k * rows)?;
            }
            t
        }
        Place::Pools => {
            let mut bytes = Vec::with_capacity(rows * cols.len() * 4);
            for &j in cols {
                bytes.extend(col(j).iter().flat_map(|&v| (v as f32).to_ne_bytes()));
            }
            let mut st = residency::state();
            crate::memory::ledger::check_budget(bytes.len() as u64, "a training batch")?;
            let ctx = st.ctx_ensure(1, Scope::Pass)?;
            let t = ctx.new_tensor(DType::F32, &shape)?;
            st.ctx_flush(&ctx, Scope::Pass)?;
            drop(st);
            crate::tensor::io::set_bytes(&t, &bytes, 0)?;
            t
        }
    };
    Ok(EngineVal::new(t, rows, cols.len(), place))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_by_index_in_both_places() {
        let _g = crate::memory::ledger::tests::serial();
        let src: Vec<f64> = (0..12).map(|v| v as f64 + 0.5).collect();
        let want = vec![6.5, 7.5, 8.5, 0.5, 1.5, 2.5, 6.5, 7.5, 8.5];
        let v = columns(&src, 3, &[2, 0, 2], Place::Cpu).unwrap();
        assert_eq!((v.shape(), v.download().unwrap().data), ((3, 3), want.clone()));
        super::super::reset_pools(&Scope::BOTH, Some(1.0)).unwrap();
        residency::state().set_backend(Some(std::sync::Arc::new(crate::backend::Backend::cpu())));
        let d = columns(&src, 3, &[2, 0, 2], Place::Pools).unwrap();
        assert_eq!(d.place, Place::Pools);
        assert_eq!(d.download().unwrap().data, want);
        assert!(columns(&src, 3, &[4], Place::Cpu).unwrap_err().to_string().contains("outside"));
        assert!(columns(&src, 5, &[0], Place::Cpu).is_err());
        super::super::reset_pools(&Scope::BOTH, None).unwrap();
    }
}
