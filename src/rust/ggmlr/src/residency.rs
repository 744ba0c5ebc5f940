//! Residency pools and the byte ledger, for the `.ag_*` internals and
//! `ag_memory_stats()` / `ag_memory_limit()`.

use crate::conv::{backend_arg, ctx_arg, exactly, f64_vec, scalar_i64, scalar_str, scalar_usize};
use crate::guard;
use crate::tensor::{tensor, tensor_robj};
use extendr_api::prelude::*;
use ggmlr_core::memory::BufferTag;
use ggmlr_core::base::dtype::DType;
use ggmlr_core::memory::ledger;
use ggmlr_core::residency::{self, Scope};
use std::sync::Arc;

fn scope_arg(x: &Robj) -> anyhow::Result<Scope> {
    Scope::parse(&scalar_str(x, "scope")?)
}

fn list_of(items: Vec<Robj>) -> Robj {
    List::from_values(items).into()
}

/// @noRd
#[extendr]
fn rs_res_set_backend(b: Robj) -> Robj {
    guard(|| {
        let backend = if b.is_null() { None } else { Some(backend_arg(&b, "backend")?.clone()) };
        if let Some(be) = &backend {
            be.check_live()?;
        }
        residency::state().set_backend(backend);
        Ok(().into())
    })
}

/// @noRd
#[extendr]
fn rs_res_gen(scope: Robj) -> Robj {
    guard(|| Ok(residency::generation(scope_arg(&scope)?).into()))
}

/// list(contexts =, buffers =, current =) of one pool.
/// @noRd
#[extendr]
fn rs_res_pool(scope: Robj) -> Robj {
    guard(|| {
        let s = scope_arg(&scope)?;
        let st = residency::state();
        let ctxs = st.contexts(s).into_iter().map(|c| ExternalPtr::new(c).into()).collect();
        let bufs = st.buffers(s).into_iter().map(|b| ExternalPtr::new(b).into()).collect();
        let cur: Robj = match st.current(s) {
            Some(c) => ExternalPtr::new(c).into(),
            None => ().into(),
        };
        Ok(list!(contexts = list_of(ctxs), buffers = list_of(bufs), current = cur).into())
    })
}

/// @noRd
#[extendr]
fn rs_res_reset(scopes: Robj, size_mb: Robj) -> Robj {
    guard(|| {
        let names: Vec<String> = match crate::rstr::strings(&scopes, "scope") {
            Ok(v) => v.into_iter().map(Option::unwrap_or_default).collect(),
            Err(_) => anyhow::bail!("`scope` must be \"all\", \"pass\" or \"persistent\""),
        };
        let scopes = names.iter().map(|n| Scope::parse(n)).collect::<anyhow::Result<Vec<_>>>()?;
        let mb = if size_mb.is_null() { None } else { Some(f64_vec(&size_mb, "size_mb")?[0]) };
        ggmlr_core::autograd::reset_pools(&scopes, mb)?;
        Ok(residency::generation(Scope::Pass).into())
    })
}

/// @noRd
#[extendr]
fn rs_res_ctx_ensure(n: Robj, scope: Robj) -> Robj {
    guard(|| {
        let n = scalar_usize(&n, "n")?;
        let c = residency::state().ctx_ensure(n, scope_arg(&scope)?)?;
        Ok(ExternalPtr::new(c).into())
    })
}

/// @noRd
#[extendr]
fn rs_res_ctx_flush(ctx: Robj, scope: Robj) -> Robj {
    guard(|| {
        let c: Arc<_> = ctx_arg(&ctx, "ctx")?.clone();
        match residency::state().ctx_flush(&c, scope_arg(&scope)?)? {
            Some(b) => Ok(ExternalPtr::new(b).into()),
            None => Ok(().into()),
        }
    })
}

/// @noRd
#[extendr]
fn rs_res_upload(data: Robj, nrow: Robj, ncol: Robj, type_: Robj, scope: Robj) -> Robj {
    guard(|| {
        let vals = f64_vec(&data, "data")?;
        let t = residency::state().upload_matrix(
            &vals,
            scalar_usize(&nrow, "nrow")?,
            scalar_usize(&ncol, "ncol")?,
            DType::from_code(scalar_i64(&type_, "dtype")?)?,
            scope_arg(&scope)?,
        )?;
        Ok(tensor_robj(t))
    })
}

/// Whether a tensor's memory can be used: live context, data present, buffer not freed.
/// @noRd
#[extendr]
fn rs_tensor_is_live(t: Robj) -> Robj {
    guard(|| Ok(tensor(&t, "tensor")?.resolve().is_ok().into()))
}

/// The pool figures of `.ag_tape_mem()`.
/// @noRd
#[extendr]
fn rs_res_mem() -> Robj {
    guard(|| {
        let st = residency::state();
        let (a, p) = (st.mem(Scope::Pass), st.mem(Scope::Persistent));
        Ok(list!(
            ctx_bytes = a.ctx_bytes,
            ctx_used = a.ctx_used,
            buffer_bytes = a.buffer_bytes,
            n_contexts = a.n_contexts as i32,
            n_buffers = a.n_buffers as i32,
            p_ctx_bytes = p.ctx_bytes,
            p_ctx_used = p.ctx_used,
            p_buffer_bytes = p.buffer_bytes,
            p_n_contexts = p.n_contexts as i32,
            p_n_buffers = p.n_buffers as i32,
            total_buffer_bytes = a.buffer_bytes + p.buffer_bytes
        )
        .into())
    })
}

/// The ledger's figures, one element per field.
/// @noRd
#[extendr]
fn rs_ledger_stats() -> Robj {
    guard(|| {
        let s = ledger::stats();
        let by = |a: &[u64; ledger::N_TAGS], t: BufferTag| a.get(ledger::tag_index(t)).copied().unwrap_or(0) as f64;
        let sum = |a: &[u64; ledger::N_TAGS]| ledger::counted(a) as f64;
        let user = |a: &[u64; ledger::N_TAGS]| by(a, BufferTag::User) + by(a, BufferTag::Context);
        Ok(list!(
            pass_bytes = by(&s.bytes, BufferTag::Pass),
            persistent_bytes = by(&s.bytes, BufferTag::Persistent),
            user_bytes = user(&s.bytes),
            total_bytes = s.total_bytes() as f64,
            peak_bytes = s.peak_bytes as f64,
            pass_buffers = by(&s.buffers, BufferTag::Pass),
            persistent_buffers = by(&s.buffers, BufferTag::Persistent),
            user_buffers = user(&s.buffers),
            total_buffers = s.total_buffers() as f64,
            upload_bytes = sum(&s.upload_bytes),
            upload_calls = sum(&s.upload_calls),
            download_bytes = sum(&s.download_bytes),
            download_calls = sum(&s.download_calls),
            copy_bytes = sum(&s.copy_bytes),
            copy_calls = sum(&s.copy_calls),
            persistent_upload_bytes = by(&s.upload_bytes, BufferTag::Persistent),
            persistent_upload_calls = by(&s.upload_calls, BufferTag::Persistent),
            pass_upload_bytes = by(&s.upload_bytes, BufferTag::Pass),
            pass_download_bytes = by(&s.download_bytes, BufferTag::Pass),
            persistent_download_bytes = by(&s.download_bytes, BufferTag::Persistent),
            ncnn_cache_bytes = ggmlr_core::ncnn::mat::cache_bytes() as f64,
            allocations = s.allocations as f64,
            refusals = s.refusals as f64,
            limit = s.limit
        )
        .into())
    })
}

/// Set the budget (bytes, Inf for none) when `bytes` is not NULL; returns the old one.
/// @noRd
#[extendr]
fn rs_ledger_limit(bytes: Robj) -> Robj {
    guard(|| {
        if bytes.is_null() {
            return Ok(ledger::limit().into());
        }
        let [v]: [f64; 1] = exactly(f64_vec(&bytes, "bytes")?, "`bytes` must be a single number (or Inf for no limit)")?;
        Ok(ledger::set_limit(v)?.into())
    })
}

/// @noRd
#[extendr]
fn rs_ledger_check(extra: Robj) -> Robj {
    guard(|| {
        const MSG: &str = "`extra_bytes` must be a single non-negative number";
        let [v]: [f64; 1] = exactly(f64_vec(&extra, "extra_bytes")?, MSG)?;
        anyhow::ensure!(v >= 0.0 && v.is_finite(), "{MSG}");
        ledger::check_budget(v as u64, "an autograd device tensor")?;
        Ok(().into())
    })
}

/// @noRd
#[extendr]
fn rs_ledger_reset_peak() -> Robj {
    guard(|| {
        ledger::reset_peak();
        Ok(().into())
    })
}

/// Seconds taken by `n` ledger check/record/release cycles (benchmarks).
/// @noRd
#[extendr]
fn rs_ledger_overhead(n: Robj) -> Robj {
    guard(|| Ok(ledger::overhead_probe(scalar_usize(&n, "n")?).as_secs_f64().into()))
}

extendr_module! {
    mod residency;
    fn rs_ledger_overhead;
    fn rs_res_set_backend;
    fn rs_res_gen;
    fn rs_res_pool;
    fn rs_res_reset;
    fn rs_res_ctx_ensure;
    fn rs_res_ctx_flush;
    fn rs_res_upload;
    fn rs_tensor_is_live;
    fn rs_res_mem;
    fn rs_ledger_stats;
    fn rs_ledger_limit;
    fn rs_ledger_check;
    fn rs_ledger_reset_peak;
}
