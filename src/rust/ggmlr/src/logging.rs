//! The engine's messages and internal-failure reports, delivered to R.
//!
//! The engine calls the installed sink from any thread; the sink only queues
//! the message. [`drain`] prints the queue through R's console (debug and
//! info to R's output, warnings and errors to its message stream) and runs
//! only on R's main thread: the guard calls it when an exported function
//! returns.

use extendr_api::prelude::*;
use ggmlr_core::base::log::{self, AbortHandler, Level, LogSink};
use std::sync::{Arc, Mutex};

static QUEUE: Mutex<Vec<(Level, String)>> = Mutex::new(Vec::new());

#[derive(Debug)]
struct RSink {
    min: Level,
}

impl LogSink for RSink {
    fn log(&self, level: Level, msg: &str) {
        if level >= self.min {
            QUEUE.lock().unwrap_or_else(|e| e.into_inner()).push((level, msg.to_string()));
        }
    }
}

/// R's handler: the failure reaches R as the error of class
/// `ggmlR_internal_error` that abandons the operation, which carries the
/// report, so nothing more is written anywhere.
struct RAbort;

impl AbortHandler for RAbort {
    fn on_abort(&self, _msg: &str) {}
}

/// Route the engine's messages of at least `min` to R.
pub fn set_r(min: Level) {
    log::set_sink(Some(Arc::new(RSink { min })));
}

pub fn set_default() {
    log::set_sink(None);
}

pub fn set_abort_r(on: bool) {
    log::set_abort_handler(if on { Some(Arc::new(RAbort)) } else { None });
}

/// Print queued messages on R's console. Call on R's main thread only.
pub fn drain() {
    let msgs = std::mem::take(&mut *QUEUE.lock().unwrap_or_else(|e| e.into_inner()));
    for (level, m) in msgs {
        match level {
            Level::Debug | Level::Info => {
                rprintln!("ggmlR: {m}");
            }
            Level::Warn | Level::Error => {
                reprintln!("ggmlR {}: {m}", level.name());
            }
        }
    }
}
