//! Tensors that R made resident through a handle (`.ag_data_set_handle()`):
//! registered with the engine's one rescue registry, so that before their
//! pool is reset a tensor that requires a gradient gets its value back on
//! the host (and forgets the device memory). A registration refers to the
//! tensor weakly (its R environment through an R weak reference, the engine
//! and device tensors through `Weak`): it never keeps a dropped model's
//! weights alive.

use crate::ag_tape::handle;
use crate::conv::scalar_str;
use crate::guard;
use crate::tensor::{tensor, TensorPtr};
use anyhow::anyhow;
use extendr_api::prelude::*;
use ggmlr_core::autograd::rescue::{self, Rescue};
use ggmlr_core::autograd::{Place, AgTensorRef, EngineVal};
use ggmlr_core::residency::Scope;
use std::sync::Arc;

use extendr_api::SEXP;

// R's weak references (Rinternals.h), which extendr does not wrap. SEXP is
// an opaque pointer here, only passed through.
#[allow(improper_ctypes)]
extern "C" {
    fn R_MakeWeakRef(key: SEXP, val: SEXP, fin: SEXP, onexit: std::os::raw::c_int) -> SEXP;
    fn R_WeakRefKey(w: SEXP) -> SEXP;
}

/// An R weak reference to an environment: it does not keep it alive.
struct WeakEnv(Robj);

impl WeakEnv {
    fn new(env: &Environment) -> WeakEnv {
        let nil = Robj::from(());
        // SAFETY: called on R's thread from an extendr function; `env` and
        // `nil` are live, protected objects, and the new weak reference is
        // protected at once by `Robj::from_sexp`.
        unsafe { WeakEnv(Robj::from_sexp(R_MakeWeakRef(env.get(), nil.get(), nil.get(), 0))) }
    }

    /// The environment, unless R has collected it.
    fn get(&self) -> Option<Environment> {
        // SAFETY: `self.0` is a protected weak reference; its key is the
        // environment or R_NilValue once collected, protected at once.
        let key = unsafe { Robj::from_sexp(R_WeakRefKey(self.0.get())) };
        key.as_environment()
    }
}

/// One registration: the tensor environment, its engine tensor and the
/// device tensor it was pointed at, all held weakly.
struct Resident {
    env: WeakEnv,
    t: std::rc::Weak<ggmlr_core::autograd::AgTensor>,
    src: std::sync::Weak<ggmlr_core::tensor::Tensor>,
    rows: usize,
    cols: usize,
}

impl Resident {
    /// The environment, engine tensor and device tensor, while the
    /// environment still points at that device tensor and requires a
    /// gradient.
    fn wanted(&self) -> Option<(Environment, AgTensorRef, TensorPtr)> {
        let (env, t, src) = (self.env.get()?, self.t.upgrade()?, self.src.upgrade()?);
        let rg = env.local(sym!(requires_grad)).ok().and_then(|v| v.as_bool()).unwrap_or(false);
        let same = env.local(sym!(ptr)).ok().and_then(|p| tensor(&p, "ptr").ok().map(|p| Arc::ptr_eq(p, &src))).unwrap_or(false);
        (rg && same && src.resolve().is_ok()).then_some((env, t, src))
    }
}

impl Rescue for Resident {
    fn rescue(&self, _scopes: &[Scope]) -> anyhow::Result<bool> {
        if let Some((env, t, src)) = self.wanted() {
            let m = EngineVal::new(src, self.rows, self.cols, Place::Pools).download()?;
            t.set_value(m);
            env.set_local(sym!(ptr), ());
            env.set_local(sym!(shape), [self.rows as i32, self.cols as i32]);
        }
        Ok(false)
    }
}

/// Registers tensor environment `env` (engine handle `h`), now pointing at
/// device tensor `ptr` of shape `shape` in pool `scope`.
/// @noRd
#[extendr]
fn rs_ag_res_register(env: Robj, h: Robj, ptr: Robj, shape: Robj, scope: Robj) -> Robj {
    guard(|| {
        let e = env.as_environment().ok_or_else(|| anyhow!("`t` must be an ag_tensor"))?;
        let dims = shape.as_integer_slice().and_then(|d| <[i32; 2]>::try_from(d).ok()).filter(|d| d.iter().all(|&x| x >= 0));
        let [rows, cols] = dims.ok_or_else(|| anyhow!("`shape` must be two non-negative integers"))?.map(|d| d as usize);
        let scope = Scope::parse(&scalar_str(&scope, "scope")?)?;
        let (t, src) = (handle(&h, "tensor")?, tensor(&ptr, "ptr")?.clone());
        let r = Resident {
            env: WeakEnv::new(&e),
            t: std::rc::Rc::downgrade(&t),
            src: Arc::downgrade(&src),
            rows,
            cols,
        };
        rescue::register_held(scope, Box::new(r));
        Ok(().into())
    })
}

extendr_module! {
    mod ag_resident;
    fn rs_ag_res_register;
}
