//! Facts and settings of the engine: CPU features, ggml's op tables, the
//! clock, the default CPU threads, logging and the abort handler.

use crate::conv::{scalar_i64, scalar_str, scalar_usize};
use crate::guard;
use extendr_api::prelude::*;
use ggmlr_core::base::cpu_features::{self, FeatureValue};
use ggmlr_core::base::{clock, log};
use ggmlr_core::op::codes;

/// Every CPU feature as a named list (logicals, integers for the counts).
/// @noRd
#[extendr]
fn rs_cpu_features() -> Robj {
    guard(|| {
        let all = cpu_features::all();
        let names: Vec<&str> = all.iter().map(|(n, _)| *n).collect();
        let values: Vec<Robj> = all
            .iter()
            .map(|(_, v)| match v {
                FeatureValue::Flag(b) => Robj::from(*b),
                FeatureValue::Count(c) => Robj::from(*c),
            })
            .collect();
        let mut l = List::from_values(values);
        l.set_names(names).map_err(|e| anyhow::anyhow!("internal: {e}"))?;
        Ok(l.into())
    })
}

/// list(name, symbol, can_inplace) of op code `code` (NULL fields past the table).
/// @noRd
#[extendr]
fn rs_op_info(code: Robj) -> Robj {
    guard(|| {
        let c = scalar_i64(&code, "op")?;
        let i = usize::try_from(c).ok();
        let (Some(name), Some(symbol)) = (i.and_then(|i| codes::OP_NAMES.get(i)), i.and_then(|i| codes::OP_SYMBOLS.get(i))) else {
            anyhow::bail!("`op` must be an op code from 0 to {}, not {c}", codes::OP_NAMES.len().min(codes::OP_SYMBOLS.len()).saturating_sub(1))
        };
        Ok(list!(name = *name, symbol = *symbol, can_inplace = codes::can_inplace(c as u32)).into())
    })
}

/// @noRd
#[extendr]
fn rs_unary_op_name(code: Robj) -> Robj {
    guard(|| {
        let c = scalar_i64(&code, "op")?;
        let name = usize::try_from(c).ok().and_then(|i| codes::UNARY_NAMES.get(i)).ok_or_else(|| {
            anyhow::anyhow!("`op` must be a unary op code from 0 to {}, not {c}", codes::UNARY_NAMES.len() - 1)
        })?;
        Ok((*name).into())
    })
}

/// "init" starts the clock; else microseconds since it started.
/// @noRd
#[extendr]
fn rs_time(what: Robj) -> Robj {
    guard(|| {
        if scalar_str(&what, "what")? == "init" {
            clock::init();
            return Ok(().into());
        }
        Ok((clock::micros() as f64).into())
    })
}

/// Threads of the CPU backend that ggml_graph_compute() uses (n = NULL: read).
/// @noRd
#[extendr]
fn rs_host_threads(n: Robj) -> Robj {
    guard(|| {
        let host = ggmlr_core::backend::host();
        if !n.is_null() {
            let n = scalar_usize(&n, "n_threads")?;
            anyhow::ensure!(n >= 1, "`n_threads` must be at least 1");
            host.set_n_threads(n)?;
        }
        Ok((host.n_threads() as i32).into())
    })
}

/// Logging to R ("r", with a minimum level) or to the process ("default");
/// "abort_r" / "abort_default" for internal failures. Returns
/// list(log_r, abort_r).
/// @noRd
#[extendr]
fn rs_log_control(what: Robj, level: Robj) -> Robj {
    guard(|| {
        match scalar_str(&what, "what")?.as_str() {
            "r" => crate::logging::set_r(log::Level::from_name(&scalar_str(&level, "level")?)?),
            "default" => crate::logging::set_default(),
            "abort_r" => crate::logging::set_abort_r(true),
            "abort_default" => crate::logging::set_abort_r(false),
            _ => {}
        }
        Ok(list!(log_r = log::has_sink(), abort_r = log::has_abort_handler()).into())
    })
}

/// A message through the engine's log (for tests of the route to R).
/// @noRd
#[extendr]
fn rs_log_message(level: Robj, msg: Robj) -> Robj {
    guard(|| {
        log::log(log::Level::from_name(&scalar_str(&level, "level")?)?, &scalar_str(&msg, "msg")?);
        Ok(().into())
    })
}

extendr_module! {
    mod info;
    fn rs_cpu_features;
    fn rs_op_info;
    fn rs_unary_op_name;
    fn rs_time;
    fn rs_host_threads;
    fn rs_log_control;
    fn rs_log_message;
}
