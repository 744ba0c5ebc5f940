//! ncnn nets and extractors for R. The net lives in an `Rc<RefCell<Net>>`
//! shared by the net's external pointer and every extractor's, so an
//! extractor keeps its net (and the net's R callbacks) alive.

use crate::conv::{scalar_i64, scalar_str, xptr};
use crate::guard;
use crate::ncnn_custom::{mat_to_r, r_to_mat, Invoker, RFactory};
use extendr_api::prelude::*;
use ggmlr_core::ncnn::registry::TypeKey;
use ggmlr_core::ncnn::{err, DataReader, Extractor, Net};
use std::cell::RefCell;
use std::rc::Rc;

pub struct RNet {
    net: Rc<RefCell<Net>>,
    invoker: Rc<Invoker>,
}

pub struct RExtractor {
    net: Rc<RefCell<Net>>,
    ex: RefCell<Extractor>,
}

fn busy() -> anyhow::Error {
    err("the net is in use (a custom layer called back into its own net while it runs); do that outside forward()")
}

fn net_of(p: &Robj) -> anyhow::Result<&RNet> {
    xptr::<RNet>(p, "net", "ncnn_net")
}

/// @noRd
#[extendr]
fn rs_ncnn_net_new(num_threads: Robj, light_mode: Robj, helper: Robj) -> Robj {
    guard(|| {
        let n = if num_threads.is_null() {
            std::thread::available_parallelism()
                .map(|v| v.get())
                .unwrap_or(1)
        } else {
            let n = scalar_i64(&num_threads, "num_threads")?;
            if !(1..=256).contains(&n) {
                return Err(err(format!(
                    "num_threads must be between 1 and 256, got {n}"
                )));
            }
            n as usize
        };
        let light = light_mode.as_bool().unwrap_or(true);
        let net = Net::new(n, light)?;
        let r = RNet {
            net: Rc::new(RefCell::new(net)),
            invoker: Rc::new(Invoker { helper }),
        };
        Ok(ExternalPtr::new(r).into())
    })
}

/// @noRd
#[extendr]
fn rs_ncnn_register(p: Robj, key: Robj, creator: Robj, destroyer: Robj) -> Robj {
    guard(|| {
        let rn = net_of(&p)?;
        let factory = Rc::new(RFactory {
            creator,
            destroyer,
            invoker: rn.invoker.clone(),
            me: RefCell::new(std::rc::Weak::new()),
        });
        *factory.me.borrow_mut() = Rc::downgrade(&factory);
        let mut net = rn.net.try_borrow_mut().map_err(|_| busy())?;
        let name;
        let k = if key.is_string() {
            name = scalar_str(&key, "type")?;
            TypeKey::Name(&name)
        } else {
            TypeKey::Index(scalar_i64(&key, "type")?)
        };
        net.registry.register(k, factory)?;
        Ok(().into())
    })
}

/// @noRd
#[extendr]
fn rs_ncnn_load_param(p: Robj, src: Robj, binary: Robj) -> Robj {
    guard(|| {
        let rn = net_of(&p)?;
        let mut net = rn.net.try_borrow_mut().map_err(|_| busy())?;
        if binary.as_bool().unwrap_or(false) {
            let bytes = src
                .as_raw_slice()
                .ok_or_else(|| err("a binary param must be a raw vector"))?;
            net.load_param_binary(bytes)?;
        } else {
            let text = scalar_str(&src, "param text")?;
            net.load_param_text(&text)?;
        }
        Ok(().into())
    })
}

/// @noRd
#[extendr]
fn rs_ncnn_load_model(p: Robj, src: Robj) -> Robj {
    guard(|| {
        let rn = net_of(&p)?;
        let reader = if src.is_null() {
            DataReader::Empty
        } else if let Some(b) = src.as_raw_slice() {
            DataReader::from_bytes(b.to_vec())
        } else {
            let path = scalar_str(&src, "source")?;
            let b = std::fs::read(&path)
                .map_err(|e| err(format!("cannot read model file '{path}': {e}")))?;
            DataReader::from_bytes(b)
        };
        let mut net = rn.net.try_borrow_mut().map_err(|_| busy())?;
        net.load_model(&reader)?;
        Ok(().into())
    })
}

/// @noRd
#[extendr]
fn rs_ncnn_clear(p: Robj) -> Robj {
    guard(|| {
        let rn = net_of(&p)?;
        let mut net = rn.net.try_borrow_mut().map_err(|_| busy())?;
        net.clear();
        Ok(().into())
    })
}

/// Blob names: `which` is "input" or "output".
/// @noRd
#[extendr]
fn rs_ncnn_blob_names(p: Robj, which: Robj) -> Robj {
    guard(|| {
        let rn = net_of(&p)?;
        let net = rn.net.try_borrow().map_err(|_| busy())?;
        let idx = if scalar_str(&which, "which")? == "input" {
            net.input_indexes()
        } else {
            net.output_indexes()
        };
        let names: Vec<String> = idx.iter().map(|&i| net.blob_name(i).to_string()).collect();
        Ok(names.into())
    })
}

/// @noRd
#[extendr]
fn rs_ncnn_layers(p: Robj) -> Robj {
    guard(|| {
        let rn = net_of(&p)?;
        let net = rn.net.try_borrow().map_err(|_| busy())?;
        let info = net.layer_info();
        let join = |v: &[usize]| {
            v.iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        let cols: Vec<Robj> = vec![
            info.iter()
                .map(|l| l.name.clone())
                .collect::<Vec<_>>()
                .into(),
            info.iter()
                .map(|l| l.type_name.clone())
                .collect::<Vec<_>>()
                .into(),
            info.iter().map(|l| l.type_index).collect::<Vec<_>>().into(),
            info.iter().map(|l| l.custom).collect::<Vec<_>>().into(),
            info.iter()
                .map(|l| join(&l.bottoms))
                .collect::<Vec<_>>()
                .into(),
            info.iter()
                .map(|l| join(&l.tops))
                .collect::<Vec<_>>()
                .into(),
        ];
        let l = List::from_names_and_values(
            ["name", "type", "type_index", "custom", "bottoms", "tops"],
            cols,
        )
        .map_err(|e| err(format!("{e}")))?;
        Ok(l.into())
    })
}

/// @noRd
#[extendr]
fn rs_ncnn_extractor_new(p: Robj) -> Robj {
    guard(|| {
        let rn = net_of(&p)?;
        let net = rn.net.try_borrow().map_err(|_| busy())?;
        let ex = Extractor::new(&net)?;
        drop(net);
        Ok(ExternalPtr::new(RExtractor {
            net: rn.net.clone(),
            ex: RefCell::new(ex),
        })
        .into())
    })
}

fn blob_index(net: &Net, blob: &Robj) -> anyhow::Result<usize> {
    if blob.is_string() {
        net.find_blob(&scalar_str(blob, "blob")?)
    } else {
        net.check_blob(scalar_i64(blob, "blob")?)
    }
}

/// @noRd
#[extendr]
fn rs_ncnn_ex_input(e: Robj, blob: Robj, x: Robj) -> Robj {
    guard(|| {
        let re = xptr::<RExtractor>(&e, "extractor", "ncnn_extractor")?;
        let net = re.net.try_borrow().map_err(|_| busy())?;
        re.ex.try_borrow().map_err(|_| busy())?.check(&net)?;
        let i = blob_index(&net, &blob)?;
        let m = r_to_mat(&x, "x")?;
        let mut ex = re.ex.try_borrow_mut().map_err(|_| busy())?;
        ex.input(&net, i, m)?;
        Ok(().into())
    })
}

/// @noRd
#[extendr]
fn rs_ncnn_ex_extract(e: Robj, blob: Robj) -> Robj {
    guard(|| {
        let re = xptr::<RExtractor>(&e, "extractor", "ncnn_extractor")?;
        let net = re.net.try_borrow().map_err(|_| busy())?;
        re.ex.try_borrow().map_err(|_| busy())?.check(&net)?;
        let i = blob_index(&net, &blob)?;
        let mut ex = re.ex.try_borrow_mut().map_err(|_| busy())?;
        let m = ex.extract(&net, i)?;
        Ok(mat_to_r(&m))
    })
}

/// Free the blob memory kept for reuse; the bytes released.
/// @noRd
#[extendr]
fn rs_ncnn_release_cache() -> Robj {
    guard(|| Ok((ggmlr_core::ncnn::mat::release_cache() as f64).into()))
}

extendr_module! {
    mod ncnn;
    fn rs_ncnn_release_cache;
    fn rs_ncnn_net_new;
    fn rs_ncnn_register;
    fn rs_ncnn_load_param;
    fn rs_ncnn_load_model;
    fn rs_ncnn_clear;
    fn rs_ncnn_blob_names;
    fn rs_ncnn_layers;
    fn rs_ncnn_extractor_new;
    fn rs_ncnn_ex_input;
    fn rs_ncnn_ex_extract;
}
