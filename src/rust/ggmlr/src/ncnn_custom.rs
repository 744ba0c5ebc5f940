//! Custom ncnn layers backed by R closures.
//!
//! Every call into R goes through one R helper (`.ncnn_invoke`, R/ncnn-invoke.R)
//! that catches R errors and returns `list(ok, value_or_message)`, so no R
//! error ever unwinds through Rust. Custom layers run on the calling (main)
//! thread; the engine runs only builtin layers on worker threads.
//!
//! Lifetimes: a registration owns its creator/destroyer (as preserved `Robj`s)
//! through an `Rc<RFactory>`; the registry holds it while current, and every
//! layer it created holds it too, so a superseded registration lives exactly
//! as long as its layers.

use crate::ncnn_params::{RModelBin, RParamDict};
use extendr_api::prelude::*;
use ggmlr_core::ncnn::{err, CustomFactory, Layer, Mat, ModelBin, Opt, ParamDict};
use std::cell::RefCell;
use std::rc::Rc;

/// Calls R functions through the error-catching helper.
pub struct Invoker {
    pub helper: Robj,
}

/// What `Invoker::call` returns for R code that was interrupted (Ctrl-C)
/// or that invoked the "abort" restart.
const INTERRUPTED: &str = "\u{0}interrupt";
const ABORTED: &str = "\u{0}abort";

/// The error of a failed call into R: `prefix: message`, or the
/// interruption (abort) itself, which must stay one.
fn failed(prefix: &str, m: String) -> anyhow::Error {
    match m.as_str() {
        INTERRUPTED => ggmlr_core::base::cancel::interrupted(),
        ABORTED => ggmlr_core::base::cancel::aborted(),
        _ => err(format!("{prefix}: {m}")),
    }
}

impl Invoker {
    /// `helper(what, f, arg)`; Ok(value) or Err(message from R).
    pub fn call(&self, what: &str, f: &Robj, arg: Robj) -> std::result::Result<Robj, String> {
        let func = self
            .helper
            .as_function()
            .ok_or_else(|| "internal: invoke helper is not a function".to_string())?;
        // The helper catches errors, interrupts and the "abort" restart; what
        // still leaves it is a jump to a restart established outside.
        let res = func.call(pairlist!(what, f.clone(), arg)).map_err(|_| {
            "its R code left through a jump to an outer restart (invokeRestart()); the pass was abandoned"
                .to_string()
        })?;
        let list = res
            .as_list()
            .ok_or_else(|| "internal: invoke helper returned no list".to_string())?;
        let flag = list.elt(0).ok().and_then(|v| v.as_logical_slice().and_then(|s| s.first().copied()));
        if flag.is_some_and(|b| b.is_na()) {
            let kind = list.elt(1).ok().and_then(|v| crate::rstr::lossy(&v)).unwrap_or_default();
            return Err(if kind == "abort" { ABORTED } else { INTERRUPTED }.to_string());
        }
        let ok = flag.is_some_and(|b| b.is_true());
        let val = list.elt(1).unwrap_or_else(|_| Robj::from(()));
        if ok {
            Ok(val)
        } else {
            Err(crate::rstr::lossy(&val).unwrap_or_else(|| "unknown R error".to_string()))
        }
    }
}

/// One registration: the creator, the destroyer (or NULL).
pub struct RFactory {
    pub creator: Robj,
    pub destroyer: Robj,
    pub invoker: Rc<Invoker>,
    /// Itself, weakly, so layers can hold their creator's registration.
    pub me: std::cell::RefCell<std::rc::Weak<RFactory>>,
}

impl CustomFactory for RFactory {
    fn create(&self) -> anyhow::Result<Box<dyn Layer>> {
        let made = self
            .invoker
            .call("create", &self.creator, Robj::from(()))
            .map_err(|m| failed("the custom layer creator failed", m))?;
        // (layer object, its forward function, one_blob_only, load_param,
        // load_model, create_pipeline, destroy_pipeline), checked in R.
        let parts = made
            .as_list()
            .ok_or_else(|| err("internal: creator result is not a list"))?;
        let part = |i: usize| {
            parts
                .elt(i)
                .map_err(|_| err("internal: creator result is incomplete"))
        };
        let obj = part(0)?;
        let forward = part(1)?;
        let one_blob_only = part(2)?.as_bool().unwrap_or(true);
        let callbacks = [part(3)?, part(4)?, part(5)?, part(6)?];
        let owner = self
            .me
            .borrow()
            .upgrade()
            .ok_or_else(|| err("internal: registration released"))?;
        Ok(Box::new(RLayer {
            obj,
            forward,
            one_blob_only,
            callbacks,
            owner,
        }))
    }

    fn destroy(&self, layer: Box<dyn Layer>) {
        if self.destroyer.is_null() {
            return;
        }
        let obj = match layer.as_any().and_then(|a| a.downcast_ref::<RLayer>()) {
            Some(l) => l.obj.clone(),
            None => return,
        };
        // Errors inside a destroyer are dropped: destruction cannot fail.
        let _ = self.invoker.call("destroy", &self.destroyer, obj);
        drop(layer);
    }
}

/// A layer made by an R creator.
pub struct RLayer {
    pub obj: Robj,
    pub forward: Robj,
    pub one_blob_only: bool,
    /// load_param, load_model, create_pipeline, destroy_pipeline (each a
    /// function or NULL).
    pub callbacks: [Robj; 4],
    /// Keeps the registration that created this layer alive.
    #[allow(dead_code)]
    pub owner: Rc<RFactory>,
}

/// A blob as an R array: one R allocation, filled in one pass.
pub fn mat_to_r(m: &Mat) -> Robj {
    let mut r = Robj::alloc_vector(extendr_api::rtype_to_sxp(Rtype::Doubles), m.data.len());
    if let Some(d) = r.as_real_slice_mut() {
        ggmlr_core::ncnn::mat::f64_from_f32(&m.data, d);
    }
    let dim: Vec<i32> = m.shape().iter().map(|x| *x as i32).collect();
    let _ = r.set_attrib("dim", dim);
    r
}

pub fn r_to_mat(x: &Robj, what: &str) -> anyhow::Result<Mat> {
    let data: Vec<f32> = if let Some(s) = x.as_real_slice() {
        ggmlr_core::ncnn::mat::f32_from_f64(s)
    } else if let Some(s) = x.as_integer_slice() {
        s.iter()
            .map(|v| if *v == i32::MIN { f32::NAN } else { *v as f32 })
            .collect()
    } else if let Some(s) = x.as_logical_slice() {
        s.iter()
            .map(|v| {
                if v.is_na() {
                    f32::NAN
                } else if v.is_true() {
                    1.0
                } else {
                    0.0
                }
            })
            .collect()
    } else {
        return Err(err(format!(
            "{what} must be a numeric array, not {:?}",
            x.rtype()
        )));
    };
    let shape: Vec<usize> = match x.get_attrib("dim") {
        Some(d) => {
            let d: Vec<usize> = if let Some(s) = d.as_integer_slice() {
                s.iter().map(|v| *v as usize).collect()
            } else if let Some(s) = d.as_real_slice() {
                s.iter().map(|v| *v as usize).collect()
            } else {
                vec![data.len()]
            };
            d
        }
        None => vec![data.len()],
    };
    if shape.is_empty() || shape.len() > 4 {
        return Err(err(format!(
            "{what} must have 1 to 4 dimensions (w, h, [d,] c), got {}",
            shape.len()
        )));
    }
    Mat::from_shape(&shape, data).map_err(|e| err(format!("{what}: {e}")))
}

/// The options a pipeline callback sees.
fn opt_list(opt: &Opt) -> Robj {
    List::from_names_and_values(["num_threads"], [Robj::from(opt.num_threads as i32)])
        .map(Robj::from)
        .unwrap_or_else(|_| Robj::from(()))
}

impl RLayer {
    /// Call callback `i` (see `callbacks`) with `arg`, when the layer has it.
    fn callback(&self, i: usize, what: &str, arg: Robj) -> anyhow::Result<()> {
        let Some(f) = self.callbacks.get(i).filter(|f| !f.is_null()) else {
            return Ok(());
        };
        self.owner
            .invoker
            .call(what, f, arg)
            .map(|_| ())
            .map_err(|m| failed(&format!("the custom layer's {what}() failed"), m))
    }
}

impl Layer for RLayer {
    fn one_blob_only(&self) -> bool {
        self.one_blob_only
    }

    fn load_param(&mut self, pd: &ParamDict) -> anyhow::Result<()> {
        // BOUNDS: `callbacks` is a [Robj; 4].
        if self.callbacks[0].is_null() {
            return Ok(());
        }
        let p: Robj = ExternalPtr::new(RParamDict(pd.clone())).into();
        self.callback(0, "load_param", p)
    }

    fn load_model(&mut self, mb: &mut ModelBin) -> anyhow::Result<()> {
        // BOUNDS: `callbacks` is a [Robj; 4].
        if self.callbacks[1].is_null() {
            return Ok(());
        }
        // The reader is lent for this call: R reads through the cell, which
        // is emptied afterwards, and the net reads on from where R stopped.
        let cell = Rc::new(RefCell::new(Some(mb.clone())));
        let p: Robj = ExternalPtr::new(RModelBin(cell.clone())).into();
        let r = self.callback(1, "load_model", p);
        if let Some(after) = cell.borrow_mut().take() {
            *mb = after;
        }
        r
    }

    fn create_pipeline(&mut self, opt: &Opt) -> anyhow::Result<()> {
        self.callback(2, "create_pipeline", opt_list(opt))
    }

    fn destroy_pipeline(&mut self, opt: &Opt) {
        // Destruction cannot fail: an R error here is dropped.
        let _ = self.callback(3, "destroy_pipeline", opt_list(opt));
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn forward(&self, bottoms: Vec<Mat>, ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let inv = &self.owner.invoker;
        if self.one_blob_only && bottoms.len() != 1 {
            return Err(err(format!(
                "the custom layer is one_blob_only but has {} bottom blobs; use ncnn_layer(one_blob_only = FALSE)",
                bottoms.len()
            )));
        }
        let arg: Robj = if self.one_blob_only {
            // BOUNDS: one_blob_only with bottoms.len() == 1 checked just above.
            mat_to_r(&bottoms[0])
        } else {
            List::from_values(bottoms.iter().map(mat_to_r)).into()
        };
        let what = if self.one_blob_only {
            "forward1"
        } else {
            "forward"
        };
        let top = inv
            .call(what, &self.forward, arg)
            .map_err(|m| failed("the custom layer's forward() failed", m))?;
        if self.one_blob_only {
            return Ok(vec![r_to_mat(&top, "the value of forward()")?]);
        }
        let list = top
            .as_list()
            .ok_or_else(|| err("forward() of a multi-blob layer must return a list of arrays"))?;
        if list.len() != ntop {
            return Err(err(format!(
                "forward() returned {} blobs, the layer declares {ntop} tops",
                list.len()
            )));
        }
        list.values()
            .enumerate()
            .map(|(i, v)| r_to_mat(&v, &format!("top {}", i + 1)))
            .collect()
    }
}
