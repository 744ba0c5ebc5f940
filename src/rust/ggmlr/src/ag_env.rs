//! The `ag_tensor` environments of the autograd API, built with R's C API.
//!
//! Every op returns a new tensor environment (fields, two active bindings and
//! a class). Built by R code that costs tens of microseconds per op, which is
//! most of a small model's training step; built here it costs about one.
//! [`rs_ag_op_host`] also reads its inputs' fields directly, so a host op is
//! one call from R. Inputs it does not handle (a tensor on "gpu", a number
//! that is not a plain double vector or matrix) make it return NULL and R
//! takes its general path.

use crate::ag_tape::{apply, handle, indices, wrap, Input};
use crate::guard;
use anyhow::{anyhow, bail};
use extendr_api::prelude::*;
use extendr_api::SEXP;
use ggmlr_core::autograd::{HostMat, AgOp};
use std::cell::Cell;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_uint};

// SEXP is a pointer to an opaque record: safe across the boundary.
#[allow(non_snake_case, non_upper_case_globals, improper_ctypes)]
extern "C" {
    static R_NilValue: SEXP;
    static R_EmptyEnv: SEXP;
    static R_UnboundValue: SEXP;
    static R_DimSymbol: SEXP;
    fn Rf_install(s: *const c_char) -> SEXP;
    fn Rf_protect(s: SEXP) -> SEXP;
    fn Rf_unprotect(n: c_int);
    fn R_PreserveObject(s: SEXP);
    fn R_NewEnv(enclos: SEXP, hash: c_int, size: c_int) -> SEXP;
    fn Rf_defineVar(sym: SEXP, val: SEXP, env: SEXP);
    fn Rf_findVarInFrame3(env: SEXP, sym: SEXP, doget: c_int) -> SEXP;
    fn R_MakeActiveBinding(sym: SEXP, fun: SEXP, env: SEXP);
    fn Rf_shallow_duplicate(s: SEXP) -> SEXP;
    fn SET_CLOENV(x: SEXP, v: SEXP);
    fn Rf_ScalarInteger(x: c_int) -> SEXP;
    fn Rf_ScalarReal(x: f64) -> SEXP;
    fn Rf_ScalarLogical(x: c_int) -> SEXP;
    fn Rf_mkString(s: *const c_char) -> SEXP;
    fn Rf_allocVector(t: c_uint, n: isize) -> SEXP;
    fn Rf_getAttrib(x: SEXP, sym: SEXP) -> SEXP;
    fn Rf_classgets(x: SEXP, klass: SEXP) -> SEXP;
    fn Rf_inherits(x: SEXP, name: *const c_char) -> c_int;
    fn OBJECT(x: SEXP) -> c_int;
    fn TYPEOF(x: SEXP) -> c_int;
    fn LOGICAL(x: SEXP) -> *mut c_int;
    fn INTEGER(x: SEXP) -> *mut c_int;
    fn REAL(x: SEXP) -> *mut f64;
    fn Rf_xlength(x: SEXP) -> isize;
    fn VECTOR_ELT(x: SEXP, i: isize) -> SEXP;
    fn SET_VECTOR_ELT(x: SEXP, i: isize, v: SEXP) -> SEXP;
    fn STRING_ELT(x: SEXP, i: isize) -> SEXP;
    fn R_CHAR(x: SEXP) -> *const c_char;
}

const LGLSXP: c_int = 10;
const INTSXP: c_int = 13;
const REALSXP: c_int = 14;
const STRSXP: c_int = 16;
const VECSXP: c_int = 19;
const ENVSXP: c_int = 4;
const CLOSXP: c_int = 3;

/// What the environments are made from: the package namespace, the
/// getter/setter templates of a tensor's `data` and `grad` (closures of one
/// argument that refer to the tensor as `e`) and that of one gradient of a
/// backward() result (referring to `store` and `id`).
#[derive(Clone, Copy)]
struct Templates {
    ns: SEXP,
    data: SEXP,
    grad: SEXP,
    grads: SEXP,
}

thread_local! {
    static TEMPLATES: Cell<Option<Templates>> = const { Cell::new(None) };
}

fn sym(name: &CStr) -> SEXP {
    // SAFETY: `name` is a NUL-terminated C string; symbols are never
    // collected, so the result needs no protection. Called on R's thread.
    unsafe { Rf_install(name.as_ptr()) }
}

/// Registers the namespace and the binding templates (from `.onLoad`).
/// @noRd
#[extendr]
fn rs_ag_env_init(ns: Robj, data: Robj, grad: Robj, grads: Robj) -> Robj {
    // SAFETY: the four SEXPs come from live Robj arguments (protected by
    // the call); their types are checked before use, and each is preserved
    // for the session before it is kept in TEMPLATES.
    guard(|| unsafe {
        let (ns, data, grad, grads) = (ns.get(), data.get(), grad.get(), grads.get());
        if TYPEOF(ns) != ENVSXP || [data, grad, grads].iter().any(|f| TYPEOF(*f) != CLOSXP) {
            bail!("rs_ag_env_init needs an environment and three functions");
        }
        for s in [ns, data, grad, grads] {
            R_PreserveObject(s);
        }
        TEMPLATES.with(|t| t.set(Some(Templates { ns, data, grad, grads })));
        Ok(().into())
    })
}

/// The fields of a new tensor environment.
pub struct Fields {
    pub handle: SEXP,
    pub id: i32,
    pub requires_grad: bool,
    pub rows: usize,
    pub cols: usize,
    pub device: SEXP,
    pub dtype: SEXP,
    pub grad_fn: Option<String>,
}

fn templates() -> anyhow::Result<Templates> {
    TEMPLATES
        .with(|t| t.get())
        .ok_or_else(|| anyhow!("the autograd bindings were not initialised (reload the package)"))
}

/// Binds `name` in `env` actively to a copy of template `tpl` whose
/// environment is `ce`.
///
/// # Safety
/// On R's thread; `tpl` a closure, `ce` and `env` environments, all
/// protected by the caller (`name` is a symbol).
unsafe fn bind(name: SEXP, tpl: SEXP, ce: SEXP, env: SEXP) {
    let f = Rf_protect(Rf_shallow_duplicate(tpl));
    SET_CLOENV(f, ce);
    R_MakeActiveBinding(name, f, env);
    Rf_unprotect(1);
}

/// The environment returned by backward(): `.store` and one active binding
/// per gradient id, named by the id, reading (or replacing) it in the store;
/// class `ag_grads`. `store` must be protected by the caller.
///
/// # Safety
/// On R's thread, after `rs_ag_env_init` (the templates are preserved).
/// Every object allocated here is protected until it is bound in `e`.
pub unsafe fn grads_env(store: SEXP, ids: &[u64]) -> anyhow::Result<SEXP> {
    let t = templates()?;
    let e = Rf_protect(R_NewEnv(R_EmptyEnv, 1, 29));
    Rf_defineVar(sym(c".store"), store, e);
    for &id in ids {
        let ce = Rf_protect(R_NewEnv(t.ns, 0, 2));
        Rf_defineVar(sym(c"store"), store, ce);
        let idv = Rf_protect(Rf_ScalarReal(id as f64));
        Rf_defineVar(sym(c"id"), idv, ce);
        let name = std::ffi::CString::new(id.to_string()).unwrap_or_default();
        bind(Rf_install(name.as_ptr()), t.grads, ce, e);
        Rf_unprotect(2);
    }
    let cls = Rf_protect(Rf_mkString(c"ag_grads".as_ptr()));
    Rf_classgets(e, cls);
    Rf_unprotect(2);
    Ok(e)
}

/// A new `ag_tensor` environment. Every SEXP in `f` must be protected by
/// the caller.
///
/// # Safety
/// On R's thread, after `rs_ag_env_init`; each new value is protected
/// while `Rf_defineVar` may allocate, and `shape` is a fresh INTSXP of
/// length 2 before its two elements are written.
pub unsafe fn tensor_env(f: &Fields) -> anyhow::Result<SEXP> {
    let t = templates()?;
    let nil = R_NilValue;
    let e = Rf_protect(R_NewEnv(R_EmptyEnv, 1, 29));
    // Each value is protected while defineVar may allocate.
    let def = |name: &CStr, v: SEXP| {
        Rf_protect(v);
        Rf_defineVar(sym(name), v, e);
        Rf_unprotect(1);
    };
    def(c"id", Rf_ScalarInteger(f.id));
    def(c".h", f.handle);
    def(c"requires_grad", Rf_ScalarLogical(f.requires_grad as c_int));
    match &f.grad_fn {
        Some(g) => {
            let s = std::ffi::CString::new(g.as_str()).unwrap_or_default();
            def(c"grad_fn", Rf_mkString(s.as_ptr()));
        }
        None => def(c"grad_fn", nil),
    }
    def(c"device", f.device);
    def(c"dtype", f.dtype);
    def(c"ptr", nil);
    let shape = Rf_protect(Rf_allocVector(INTSXP as c_uint, 2));
    *INTEGER(shape) = f.rows as c_int;
    *INTEGER(shape).add(1) = f.cols as c_int;
    def(c"shape", shape);
    Rf_unprotect(1);
    def(c"ctx_gen", nil);
    def(c"ctx_scope", nil);
    // The bindings' closures see the tensor as `e` and the namespace above it.
    let ce = Rf_protect(R_NewEnv(t.ns, 0, 1));
    Rf_defineVar(sym(c"e"), e, ce);
    for (name, tpl) in [(c"data", t.data), (c"grad", t.grad)] {
        bind(sym(name), tpl, ce, e);
    }
    let cls = Rf_protect(Rf_mkString(c"ag_tensor".as_ptr()));
    Rf_classgets(e, cls);
    Rf_unprotect(3);
    Ok(e)
}

/// Builds a tensor environment from R values (the general path of R's
/// `.ag_make`): handle, id, requires_grad, nrow, ncol, device, dtype, grad_fn.
/// @noRd
#[extendr]
#[allow(clippy::too_many_arguments)]
fn rs_ag_make_env(h: Robj, id: Robj, rg: Robj, nr: Robj, nc: Robj, device: Robj, dtype: Robj, grad_fn: Robj) -> Robj {
    // SAFETY: the SEXPs handed to `tensor_env` belong to the Robj arguments,
    // which the call protects until it returns.
    guard(|| unsafe {
        let num = |x: &Robj, what: &str| -> anyhow::Result<f64> {
            x.as_real().or_else(|| x.as_integer().map(f64::from)).ok_or_else(|| anyhow!("`{what}` must be a number"))
        };
        let f = Fields {
            handle: h.get(),
            id: num(&id, "id")? as i32,
            requires_grad: rg.as_bool().unwrap_or(false),
            rows: num(&nr, "nrow")? as usize,
            cols: num(&nc, "ncol")? as usize,
            device: device.get(),
            dtype: dtype.get(),
            grad_fn: crate::rstr::lossy(&grad_fn),
        };
        Ok(Robj::from_sexp(tensor_env(&f)?))
    })
}

/// A field of a tensor environment (NULL when absent).
///
/// # Safety
/// On R's thread; `e` an environment. The value is owned by `e` (no
/// protection needed while `e` is reachable).
unsafe fn field(e: SEXP, name: &CStr) -> SEXP {
    let v = Rf_findVarInFrame3(e, sym(name), 1);
    if v == R_UnboundValue {
        R_NilValue
    } else {
        v
    }
}

/// Whether `x` is the single string `s`.
///
/// # Safety
/// On R's thread; `x` a live SEXP (its type and length are checked before
/// its element is read).
unsafe fn is_string(x: SEXP, s: &str) -> bool {
    TYPEOF(x) == STRSXP
        && Rf_xlength(x) == 1
        && CStr::from_ptr(R_CHAR(STRING_ELT(x, 0))).to_bytes() == s.as_bytes()
}

/// A plain double vector or matrix (no class) as a `HostMat`; None otherwise.
///
/// # Safety
/// On R's thread; `x` a live SEXP. Its type is checked before `REAL` is
/// read, `n` is its length, and the dims are read only from an INTSXP of
/// length 2. The values are copied out.
unsafe fn plain_double(x: SEXP) -> Option<HostMat> {
    if TYPEOF(x) != REALSXP || OBJECT(x) != 0 {
        return None;
    }
    let n = Rf_xlength(x) as usize;
    let dim = Rf_getAttrib(x, R_DimSymbol);
    let (r, c) = if TYPEOF(dim) == INTSXP && Rf_xlength(dim) == 2 {
        (*INTEGER(dim) as usize, *INTEGER(dim).add(1) as usize)
    } else if dim == R_NilValue {
        (n, 1)
    } else {
        return None;
    };
    let data = if n == 0 { Vec::new() } else { std::slice::from_raw_parts(REAL(x), n).to_vec() };
    HostMat::new(r, c, data).ok()
}

/// Applies op `name` to `inputs` (a list of `ag_tensor`s and plain numeric
/// values) on the host and returns the result's tensor environment (or
/// `list(tensor, aux)` when `aux` is TRUE). Returns NULL when an input is
/// on "gpu" or needs R's conversion, for R's general path.
/// @noRd
#[extendr]
fn rs_ag_op_host(name: Robj, inputs: Robj, params: Robj, idx: Robj, aux: Robj) -> Robj {
    let nil = || Robj::from(());
    // SAFETY: `inputs` is protected by the call and every element read from
    // it is owned by it; the types of the elements are checked before they
    // are read (see `field`, `is_string`, `plain_double`).
    guard(|| unsafe {
        let list = inputs.get();
        if TYPEOF(list) != VECSXP {
            return Ok(nil());
        }
        let p = if params.is_null() {
            Vec::new()
        } else {
            match crate::conv::f64_vec(&params, "params") {
                Ok(p) => p,
                Err(_) => return Ok(nil()),
            }
        };
        let n = Rf_xlength(list);
        let mut ins = Vec::with_capacity(n as usize);
        let (mut device, mut dtype) = (None, None);
        for i in 0..n {
            let x = VECTOR_ELT(list, i);
            if TYPEOF(x) == ENVSXP && Rf_inherits(x, c"ag_tensor".as_ptr()) != 0 {
                let dev = field(x, c"device");
                if is_string(dev, "gpu") {
                    return Ok(nil());
                }
                device.get_or_insert(dev);
                dtype.get_or_insert(field(x, c"dtype"));
                let rg = field(x, c"requires_grad");
                let rg = TYPEOF(rg) == LGLSXP && Rf_xlength(rg) == 1 && *LOGICAL(rg) == 1;
                let h = Robj::from_sexp(field(x, c".h"));
                ins.push(Input::Tensor(handle(&h, "input")?, rg));
            } else {
                match plain_double(x) {
                    Some(m) => ins.push(Input::Value(m)),
                    None => return Ok(nil()),
                }
            }
        }
        let (Some(device), Some(dtype)) = (device, dtype) else { return Ok(nil()) };
        let name = crate::rstr::scalar(&name, "name")?;
        let name = name.as_str();
        let idx = indices(&idx)?;
        let op = AgOp::parse(name, &p, idx)?;
        let applied = apply(op, ins, false)?;
        let (rows, cols) = applied.tensor.shape();
        let id = applied.tensor.id as i32;
        let h = wrap(applied.tensor);
        let f = Fields {
            handle: h.get(),
            id,
            requires_grad: applied.requires_grad,
            rows,
            cols,
            device,
            dtype,
            grad_fn: applied.requires_grad.then(|| format!("ag_{name}")),
        };
        let e = Robj::from_sexp(tensor_env(&f)?);
        if aux.as_bool() == Some(true) {
            let l = Rf_protect(Rf_allocVector(VECSXP as c_uint, 2));
            SET_VECTOR_ELT(l, 0, e.get());
            SET_VECTOR_ELT(l, 1, Robj::from(applied.aux).get());
            Rf_unprotect(1);
            Ok(Robj::from_sexp(l))
        } else {
            Ok(e)
        }
    })
}

extendr_module! {
    mod ag_env;
    fn rs_ag_env_init;
    fn rs_ag_make_env;
    fn rs_ag_op_host;
}
