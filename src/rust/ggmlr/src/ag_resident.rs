//! Tensors that R made resident through a handle (`.ag_data_set_handle()`):
//! registered with the engine's one rescue registry, so that before their
//! pool is reset a tensor that requires a gradient gets its value back on
//! the host (and forgets the device memory).

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

/// One registration: the tensor environment, its engine tensor and the
/// device tensor it was pointed at.
struct Resident {
    env: Environment,
    t: AgTensorRef,
    src: TensorPtr,
    rows: usize,
    cols: usize,
}

impl Resident {
    /// Whether the environment still points at `src` and requires a gradient.
    fn wanted(&self) -> bool {
        let rg = self.env.local(sym!(requires_grad)).ok().and_then(|v| v.as_bool()).unwrap_or(false);
        let same = self
            .env
            .local(sym!(ptr))
            .ok()
            .and_then(|p| tensor(&p, "ptr").ok().map(|p| Arc::ptr_eq(p, &self.src)))
            .unwrap_or(false);
        rg && same && self.src.resolve().is_ok()
    }
}

impl Rescue for Resident {
    fn rescue(&self, _scopes: &[Scope]) -> anyhow::Result<bool> {
        if self.wanted() {
            let m = EngineVal::new(self.src.clone(), self.rows, self.cols, Place::Pools).download()?;
            self.t.set_value(m);
            self.env.set_local(sym!(ptr), ());
            self.env.set_local(sym!(shape), [self.rows as i32, self.cols as i32]);
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
        let dims = shape.as_integer_slice().filter(|d| d.len() == 2 && d.iter().all(|&x| x >= 0));
        let dims = dims.ok_or_else(|| anyhow!("`shape` must be two non-negative integers"))?;
        let scope = Scope::parse(&scalar_str(&scope, "scope")?)?;
        let r = Resident { env: e, t: handle(&h, "tensor")?, src: tensor(&ptr, "ptr")?.clone(), rows: dims[0] as usize, cols: dims[1] as usize };
        rescue::register_held(scope, Box::new(r));
        Ok(().into())
    })
}

extendr_module! {
    mod ag_resident;
    fn rs_ag_res_register;
}
