//! Autograd bindings: tensors as external pointers to engine tensors, the
//! tape, optimizers. Conversions only; the work is in `ggmlr_core::autograd`.

use crate::ag_tape::{apply, handle, indices, with_tape, wrap, Input};
use crate::conv::{scalar_str, xptr};
use crate::guard;
use anyhow::{anyhow, bail};
use extendr_api::prelude::*;
use ggmlr_core::autograd::place::{host_values, upload};
use ggmlr_core::autograd::samples::Samples;
use ggmlr_core::autograd::{clip_factor, clip_grads, grad_cell, GradCell, GradIn, HostMat, AgOp, OptKind, Optimizer, Place, Storage};
use std::cell::RefCell;
use std::collections::HashMap;

/// The gradients of one backward pass, by tensor id: they stay in the engine
/// (on the device for "gpu") until R reads one (the `ag_grads`
/// environment's active bindings), which downloads it.
type GradStore = RefCell<HashMap<u64, GradCell>>;
const STORE: &str = "gradient store";

fn id_of(x: &Robj, what: &str) -> anyhow::Result<u64> {
    let v = x.as_real().or_else(|| x.as_integer().map(f64::from)).ok_or_else(|| anyhow!("`{what}` must be a tensor id"))?;
    if !(v >= 0.0 && v.fract() == 0.0) {
        bail!("`{what}` must be a tensor id, not {v}");
    }
    Ok(v as u64)
}


/// A numeric vector or matrix as a `HostMat` (a vector is one column).
fn to_mat(x: &Robj, what: &str) -> anyhow::Result<HostMat> {
    let data = x
        .as_real_slice()
        .ok_or_else(|| anyhow!("`{what}` must be a numeric matrix or vector, not {:?}", x.rtype()))?;
    let dim: Option<Vec<i32>> = x.get_attrib("dim").and_then(|d| d.as_integer_vector());
    let (r, c) = match dim.as_deref() {
        Some([r, c]) => (*r as usize, *c as usize),
        Some([_]) | None => (data.len(), 1),
        Some(d) => bail!("`{what}` must be a matrix or a vector, not an array with {} dimensions", d.len()),
    };
    HostMat::new(r, c, data.to_vec())
}

fn from_mat(m: &HostMat) -> anyhow::Result<Robj> {
    let mut r: Robj = m.data.as_slice().into();
    r.set_attrib("dim", [m.rows as i32, m.cols as i32])
        .map_err(|e| anyhow!("could not set dimensions: {e}"))?;
    Ok(r)
}


/// @noRd
#[extendr]
fn rs_ag_new(data: Robj) -> Robj {
    guard(|| {
        let m = to_mat(&data, "data")?;
        let t = with_tape(|tp| tp.tensor(m));
        let id = t.id as f64;
        Ok(list!(wrap(t), id).into())
    })
}

/// The columns `idx` (1-based) of the numeric matrix `x` as a new tensor
/// on `device` ("cpu" or "gpu"), written from R's memory in one pass.
/// @noRd
#[extendr]
fn rs_ag_batch(x: Robj, idx: Robj, device: Robj) -> Robj {
    guard(|| {
        let data = x.as_real_slice().ok_or_else(|| anyhow!("`x` must be a numeric matrix, not {:?}", x.rtype()))?;
        let rows = match x.get_attrib("dim").and_then(|d| d.as_integer_vector()).as_deref() {
            Some([r, _]) => *r as usize,
            _ => bail!("`x` must be a matrix"),
        };
        let cols: Vec<usize> = match idx.as_integer_slice() {
            Some(v) if v.iter().all(|&i| i >= 1) => v.iter().map(|&i| i as usize - 1).collect(),
            _ => bail!("`idx` must be a vector of positive column numbers"),
        };
        let place = if scalar_str(&device, "device")? == "gpu" { Place::Pools } else { Place::Cpu };
        let v = ggmlr_core::autograd::batch::columns(data, rows, &cols, place)?;
        let t = with_tape(|tp| tp.tensor_engine(v));
        let id = t.id as f64;
        Ok(list!(wrap(t), id).into())
    })
}

/// The samples of the numeric array `x` (`[n, dims...]`) converted once to
/// f32 columns (see `ggmlr_core::autograd::samples`), for `rs_ag_samples_batch`.
/// @noRd
#[extendr]
fn rs_ag_samples(x: Robj) -> Robj {
    guard(|| {
        let data = x.as_real_slice().ok_or_else(|| anyhow!("`x` must be a numeric array, not {:?}", x.rtype()))?;
        let dim: Vec<usize> = match x.get_attrib("dim").and_then(|d| d.as_integer_vector()) {
            Some(d) if d.len() >= 2 && d.iter().all(|&v| v > 0) => d.iter().map(|&v| v as usize).collect(),
            _ => bail!("`x` must be a matrix or an array with samples in its first dimension"),
        };
        let Some((&n, rest)) = dim.split_first() else { bail!("`x` must be a matrix or an array") };
        let s = Samples::from_array(data, n, rest)?;
        Ok(ExternalPtr::new(s).into())
    })
}

/// Samples `idx` (1-based) of `samples` (from `rs_ag_samples`) as a new
/// f32 tensor on device "gpu".
/// @noRd
#[extendr]
fn rs_ag_samples_batch(samples: Robj, idx: Robj) -> Robj {
    guard(|| {
        let s: &Samples = xptr(&samples, "samples", "training data")?;
        let cols: Vec<usize> = match idx.as_integer_slice() {
            Some(v) if v.iter().all(|&i| i >= 1) => v.iter().map(|&i| i as usize - 1).collect(),
            _ => bail!("`idx` must be a vector of positive sample numbers"),
        };
        let v = s.batch(&cols)?;
        let t = with_tape(|tp| tp.tensor_engine(v));
        let id = t.id as f64;
        Ok(list!(wrap(t), id).into())
    })
}

/// Opens (`open = TRUE`) or closes a scratch scope of the tape: closing
/// releases the memory of every tensor made in it (see `Tape::scratch_end`).
/// Returns how many tensors were released.
/// @noRd
#[extendr]
fn rs_ag_scratch(open: Robj) -> Robj {
    guard(|| {
        let open = open.as_bool().ok_or_else(|| anyhow!("`open` must be TRUE or FALSE"))?;
        let n = with_tape(|tp| if open { tp.scratch_begin() } else { tp.scratch_end() })?;
        Ok(Robj::from(n as f64))
    })
}

/// @noRd
#[extendr]
fn rs_ag_value(h: Robj) -> Robj {
    guard(|| {
        let t = handle(&h, "tensor")?;
        let v = t.value();
        from_mat(&*host_values(&v)?)
    })
}

/// Makes a tensor's value resident in the pool `scope` ("persistent" for
/// parameters): uploaded once, then used in place. Returns the engine tensor.
/// @noRd
#[extendr]
fn rs_ag_to_device(h: Robj, scope: Robj, dtype: Robj) -> Robj {
    guard(|| {
        let t = handle(&h, "tensor")?;
        let scope = ggmlr_core::residency::Scope::parse(&scalar_str(&scope, "scope")?)?;
        let dtype = match scalar_str(&dtype, "dtype")?.as_str() {
            "f16" => ggmlr_core::base::dtype::DType::F16,
            "bf16" => ggmlr_core::base::dtype::DType::BF16,
            _ => ggmlr_core::base::dtype::DType::F32,
        };
        let v = t.value();
        let dev = match v.engine() {
            Some(d) if d.place == Place::Pools && scope == ggmlr_core::residency::Scope::Pass => d.clone(),
            // A resident parameter is kept by the tensors that hold it (a
            // model's weights go with the model), not by the pool.
            _ if scope == ggmlr_core::residency::Scope::Persistent => {
                let m = host_values(&v)?;
                let held = ggmlr_core::residency::Hold::Handles;
                let e = ggmlr_core::residency::state().upload_held(&m.data, m.rows, m.cols, dtype, scope, held)?;
                ggmlr_core::autograd::EngineVal::new(e, m.rows, m.cols, Place::Pools)
            }
            _ => upload(&*host_values(&v)?, Place::Pools, scope, dtype)?,
        };
        t.set_storage(Storage::Engine(dev.clone()));
        Ok(crate::tensor::tensor_robj(dev.t))
    })
}

/// @noRd
#[extendr]
fn rs_ag_set_value(h: Robj, data: Robj) -> Robj {
    guard(|| {
        let t = handle(&h, "tensor")?;
        t.set_value(to_mat(&data, "value")?);
        Ok(().into())
    })
}

/// @noRd
#[extendr]
fn rs_ag_grad(h: Robj) -> Robj {
    guard(|| {
        let t = handle(&h, "tensor")?;
        match t.grad()? {
            Some(m) => from_mat(&m),
            None => Ok(().into()),
        }
    })
}

/// @noRd
#[extendr]
fn rs_ag_set_grad(h: Robj, value: Robj) -> Robj {
    guard(|| {
        let t = handle(&h, "tensor")?;
        let g = if value.is_null() { None } else { Some(to_mat(&value, "grad")?) };
        t.set_grad(g);
        Ok(().into())
    })
}

/// Tape control: "begin", "end", "clear", "enabled", "length".
/// @noRd
#[extendr]
fn rs_ag_tape(cmd: Robj) -> Robj {
    guard(|| {
        let cmd = scalar_str(&cmd, "cmd")?;
        with_tape(|tp| {
            Ok(match cmd.as_str() {
                "begin" => {
                    tp.begin();
                    ().into()
                }
                "end" => {
                    tp.end();
                    ().into()
                }
                "clear" => {
                    tp.clear();
                    ().into()
                }
                "enabled" => tp.enabled().into(),
                "length" => (tp.len() as i32).into(),
                other => bail!("unknown tape command '{other}'"),
            })
        })
    })
}

/// Applies op `name` to `inputs` (handles or numeric matrices); `rg[i]` says
/// whether input i requires a gradient. Returns list(handle, id, rg, nrow, ncol, aux).
/// @noRd
#[extendr]
fn rs_ag_op(name: Robj, inputs: Robj, rg: Robj, params: Robj, idx: Robj, device: Robj) -> Robj {
    guard(|| {
        let name = scalar_str(&name, "name")?;
        let p: Vec<f64> = if params.is_null() {
            Vec::new()
        } else {
            params.as_real_slice().ok_or_else(|| anyhow!("op parameters must be numeric"))?.to_vec()
        };
        let op = AgOp::parse(&name, &p, indices(&idx)?)?;
        let list = inputs.as_list().ok_or_else(|| anyhow!("inputs must be a list"))?;
        let flags = rg.as_logical_slice().ok_or_else(|| anyhow!("rg must be logical"))?;
        if flags.len() != list.len() {
            bail!("rg must have one flag per input");
        }
        let mut ins = Vec::with_capacity(list.len());
        for (i, ((_, x), flag)) in list.iter().zip(flags).enumerate() {
            ins.push(if x.is_external_pointer() {
                Input::Tensor(handle(&x, "input")?, flag.is_true())
            } else {
                Input::Value(to_mat(&x, &format!("input {} of {}", i + 1, op.r_name()))?)
            });
        }
        let on_device = device.as_logical().map(|b| b.is_true()).unwrap_or(false);
        let a = apply(op, ins, on_device)?;
        let (r, c) = a.tensor.shape();
        let id = a.tensor.id as f64;
        Ok(list!(wrap(a.tensor), id, a.requires_grad, r as i32, c as i32, a.aux).into())
    })
}


/// Backward from `loss`: the `ag_grads` environment over a store that holds
/// the leaves' gradients by id.
/// @noRd
#[extendr]
fn rs_ag_backward(loss: Robj) -> Robj {
    guard(|| {
        let t = handle(&loss, "loss")?;
        let res = with_tape(|tp| tp.backward(&t))?;
        let ids: Vec<u64> = res.iter().map(|(t, _)| t.id).collect();
        let map: HashMap<u64, GradCell> = res.into_iter().map(|(t, g)| (t.id, grad_cell(g))).collect();
        let store: GradStore = RefCell::new(map);
        let store: Robj = ExternalPtr::new(store).into();
        // SAFETY: `store` is protected (an Robj) while the environment is built.
        unsafe { Ok(Robj::from_sexp(crate::ag_env::grads_env(store.get(), &ids)?)) }
    })
}

/// One gradient of a store as a matrix (NULL when absent).
/// @noRd
#[extendr]
fn rs_ag_store_get(store: Robj, id: Robj) -> Robj {
    guard(|| {
        let s: &GradStore = xptr(&store, "grads", STORE)?;
        let id = id_of(&id, "id")?;
        let g = s.borrow().get(&id).map(|c| c.borrow().clone());
        match g {
            Some(g) => from_mat(&g.to_host()?),
            None => Ok(().into()),
        }
    })
}

/// Replaces (or, with NULL, removes) one gradient of a store.
/// @noRd
#[extendr]
fn rs_ag_store_set(store: Robj, id: Robj, value: Robj) -> Robj {
    guard(|| {
        let s: &GradStore = xptr(&store, "grads", STORE)?;
        let id = id_of(&id, "id")?;
        if value.is_null() {
            s.borrow_mut().remove(&id);
        } else {
            let g = to_mat(&value, "gradient")?;
            s.borrow_mut().insert(id, grad_cell(Storage::Host(g)));
        }
        Ok(().into())
    })
}

/// Drops the device gradients of `params` from a store (the optimizer's
/// `zero_grad()` after it stepped with them), so that the next reset of the
/// pass pool need not copy them to the host.
/// @noRd
#[extendr]
fn rs_ag_store_release(store: Robj, params: Robj) -> Robj {
    guard(|| {
        let s: &GradStore = xptr(&store, "grads", STORE)?;
        let pl = params.as_list().ok_or_else(|| anyhow!("params must be a list"))?;
        let mut map = s.borrow_mut();
        for p in pl.values() {
            map.remove(&handle(&p, "parameter")?.id);
        }
        Ok(().into())
    })
}

/// Clears the accumulated gradients of the tensors in `params`.
/// @noRd
#[extendr]
fn rs_ag_zero_grad(params: Robj) -> Robj {
    guard(|| {
        let pl = params.as_list().ok_or_else(|| anyhow!("params must be a list"))?;
        for p in pl.values() {
            handle(&p, "parameter")?.set_grad(None);
        }
        Ok(().into())
    })
}

fn num(x: &[f64], i: usize) -> f64 {
    x.get(i).copied().unwrap_or(f64::NAN)
}

/// @noRd
#[extendr]
fn rs_ag_opt_new(kind: Robj, hyper: Robj, n: Robj) -> Robj {
    guard(|| {
        let kind = scalar_str(&kind, "kind")?;
        let h = hyper.as_real_slice().ok_or_else(|| anyhow!("hyper-parameters must be numeric"))?;
        let n = crate::conv::scalar_i64(&n, "n")? as usize;
        let k = match kind.as_str() {
            "sgd" => OptKind::Sgd { momentum: num(h, 0) },
            "adam" => OptKind::Adam { beta1: num(h, 0), beta2: num(h, 1), eps: num(h, 2) },
            "adamw" => OptKind::AdamW { beta1: num(h, 0), beta2: num(h, 1), eps: num(h, 2), weight_decay: num(h, 3) },
            other => bail!("unknown optimizer '{other}'"),
        };
        Ok(ExternalPtr::new(RefCell::new(Optimizer::new(k, n))).into())
    })
}

/// @noRd
#[extendr]
fn rs_ag_opt_step(opt: Robj, params: Robj, names: Robj, grads: Robj, lr: Robj) -> Robj {
    guard(|| {
        let o: &RefCell<Optimizer> = xptr(&opt, "optimizer", "optimizer state")?;
        let pl = params.as_list().ok_or_else(|| anyhow!("params must be a list"))?;
        let gl = grads.as_list().ok_or_else(|| anyhow!("grads must be a list"))?;
        let ps = pl.values().map(|p| handle(&p, "parameter")).collect::<anyhow::Result<Vec<_>>>()?;
        let nm: Vec<String> = crate::rstr::strings(&names, "names")
            .map(|v| v.into_iter().map(Option::unwrap_or_default).collect())
            .unwrap_or_default();
        let gvals: Vec<Robj> = gl.values().collect();
        let mut gs: Vec<Option<GradIn>> = Vec::with_capacity(gvals.len());
        for (i, g) in gvals.iter().enumerate() {
            if g.is_null() {
                gs.push(None);
            } else {
                let s = g.as_real_slice().ok_or_else(|| {
                    anyhow!("the gradient of parameter '{}' must be a numeric matrix", nm.get(i).map(String::as_str).unwrap_or("?"))
                })?;
                gs.push(Some(GradIn::Host(s)));
            }
        }
        let lr = lr.as_real().ok_or_else(|| anyhow!("`lr` must be a number"))?;
        o.borrow_mut().step(&ps, &nm, &gs, lr)?;
        Ok(().into())
    })
}

/// One optimizer step with the gradients of a store (no copies through R).
/// @noRd
#[extendr]
fn rs_ag_opt_step_store(opt: Robj, params: Robj, names: Robj, store: Robj, lr: Robj) -> Robj {
    guard(|| {
        let o: &RefCell<Optimizer> = xptr(&opt, "optimizer", "optimizer state")?;
        let s: &GradStore = xptr(&store, "grads", STORE)?;
        let pl = params.as_list().ok_or_else(|| anyhow!("params must be a list"))?;
        let ps = pl.values().map(|p| handle(&p, "parameter")).collect::<anyhow::Result<Vec<_>>>()?;
        let nm: Vec<String> = crate::rstr::strings(&names, "names")
            .map(|v| v.into_iter().map(Option::unwrap_or_default).collect())
            .unwrap_or_default();
        // The gradients are read where they are (no copy of host matrices).
        let cells: Vec<Option<GradCell>> = {
            let map = s.borrow();
            ps.iter().map(|p| map.get(&p.id).cloned()).collect()
        };
        let held: Vec<Option<std::cell::Ref<Storage>>> = cells.iter().map(|c| c.as_ref().map(|c| c.borrow())).collect();
        let gs: Vec<Option<GradIn>> = held
            .iter()
            .map(|g| {
                g.as_ref().map(|g| GradIn::Stored(g))
            })
            .collect();
        let lr = lr.as_real().ok_or_else(|| anyhow!("`lr` must be a number"))?;
        o.borrow_mut().step(&ps, &nm, &gs, lr)?;
        Ok(().into())
    })
}

/// Clips the gradients of `params` in a store to a global norm; returns the
/// norm before clipping.
/// @noRd
#[extendr]
fn rs_ag_clip_store(store: Robj, params: Robj, max_norm: Robj) -> Robj {
    guard(|| {
        let s: &GradStore = xptr(&store, "grads", STORE)?;
        let pl = params.as_list().ok_or_else(|| anyhow!("params must be a list"))?;
        let ids = pl.values().map(|p| handle(&p, "parameter").map(|t| t.id)).collect::<anyhow::Result<Vec<_>>>()?;
        let mx = max_norm.as_real().ok_or_else(|| anyhow!("`max_norm` must be a number"))?;
        let cells: Vec<GradCell> = {
            let map = s.borrow();
            ids.iter().filter_map(|id| map.get(id).cloned()).collect()
        };
        Ok(clip_grads(&cells, mx)?.into())
    })
}

/// Step count of an optimizer, and the moments of parameter `i` (1-based).
/// @noRd
#[extendr]
fn rs_ag_opt_state(opt: Robj, i: Robj) -> Robj {
    guard(|| {
        let o: &RefCell<Optimizer> = xptr(&opt, "optimizer", "optimizer state")?;
        let i = crate::conv::scalar_i64(&i, "i")? as usize;
        let o = o.borrow();
        let (m, v): (Robj, Robj) = match i.checked_sub(1).and_then(|k| o.moment(k)) {
            Some((m, v)) => (m.into(), v.into()),
            None => (().into(), ().into()),
        };
        Ok(list!(t = o.t as f64, m = m, v = v).into())
    })
}

/// Global L2 norm of a list of gradients and the clipping factor.
/// @noRd
#[extendr]
fn rs_ag_clip(grads: Robj, max_norm: Robj) -> Robj {
    guard(|| {
        let gl = grads.as_list().ok_or_else(|| anyhow!("grads must be a list"))?;
        let vals: Vec<Robj> = gl.values().collect();
        let slices = vals
            .iter()
            .map(|g| g.as_real_slice().ok_or_else(|| anyhow!("every gradient must be a numeric matrix")))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let mx = max_norm.as_real().ok_or_else(|| anyhow!("`max_norm` must be a number"))?;
        let (norm, f) = clip_factor(&slices, mx)?;
        Ok(list!(norm = norm, factor = f).into())
    })
}

extendr_module! {
    mod autograd;
    fn rs_ag_new;
    fn rs_ag_batch;
    fn rs_ag_samples;
    fn rs_ag_samples_batch;
    fn rs_ag_scratch;
    fn rs_ag_value;
    fn rs_ag_to_device;
    fn rs_ag_set_value;
    fn rs_ag_grad;
    fn rs_ag_set_grad;
    fn rs_ag_tape;
    fn rs_ag_op;
    fn rs_ag_backward;
    fn rs_ag_store_get;
    fn rs_ag_store_set;
    fn rs_ag_store_release;
    fn rs_ag_zero_grad;
    fn rs_ag_opt_step_store;
    fn rs_ag_clip_store;
    fn rs_ag_opt_new;
    fn rs_ag_opt_step;
    fn rs_ag_opt_state;
    fn rs_ag_clip;
}
