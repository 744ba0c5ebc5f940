//! This session's tape and the external pointers to its tensors: what both
//! the autograd bindings and the tensor environments stand on.

use crate::conv::xptr;
use anyhow::{anyhow, bail};
use extendr_api::prelude::*;
use ggmlr_core::autograd::{Applied, HostMat, AgOp, Tape, AgTensorRef};
use std::cell::RefCell;

thread_local! {
    static TAPE: RefCell<Tape> = RefCell::new(Tape::new());
}

const KIND: &str = "ag_tensor handle";

/// Runs `f` on this session's tape.
pub(crate) fn with_tape<R>(f: impl FnOnce(&mut Tape) -> R) -> R {
    TAPE.with(|tp| f(&mut tp.borrow_mut()))
}

/// The 0-based indices of an op (NULL: none).
pub(crate) fn indices(idx: &Robj) -> anyhow::Result<Option<Vec<usize>>> {
    if idx.is_null() {
        return Ok(None);
    }
    let v = idx.as_integer_slice().ok_or_else(|| anyhow!("indices must be integers"))?;
    if let Some(bad) = v.iter().find(|&&i| i < 0) {
        bail!("index {bad} is negative (or NA); indices are 0-based and must be >= 0");
    }
    Ok(Some(v.iter().map(|&i| i as usize).collect()))
}

/// The engine tensor behind handle `x`.
pub(crate) fn handle(x: &Robj, what: &str) -> anyhow::Result<AgTensorRef> {
    Ok(xptr::<AgTensorRef>(x, what, KIND)?.clone())
}

pub(crate) fn wrap(t: AgTensorRef) -> Robj {
    ExternalPtr::new(t).into()
}

/// One input of an op: an engine tensor with its gradient flag, or a value
/// (which needs no gradient).
pub(crate) enum Input {
    Tensor(AgTensorRef, bool),
    Value(HostMat),
}

/// Applies `op` to `ins` on this session's tape (values become tensors).
pub(crate) fn apply(op: AgOp, ins: Vec<Input>, on_device: bool) -> anyhow::Result<Applied> {
    with_tape(|tp| {
        let (mut ts, mut rgs) = (Vec::with_capacity(ins.len()), Vec::with_capacity(ins.len()));
        for x in ins {
            let (t, rg) = match x {
                Input::Tensor(t, rg) => (t, rg),
                Input::Value(m) => (tp.tensor(m), false),
            };
            ts.push(t);
            rgs.push(rg);
        }
        tp.apply_on(op, &ts, &rgs, on_device)
    })
}
