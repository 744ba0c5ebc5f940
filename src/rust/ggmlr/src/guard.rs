//! The boundary between R and the engine.
//!
//! Every exported function runs its body through [`guard`]. An engine error or
//! a panic never unwinds into R and never calls R's longjmp-based `Rf_error`
//! from Rust: it is returned as a small list of class `ggmlR_rust_error`, and
//! the R wrappers (`.rs()` in R/errors.R) turn it into an ordinary R condition.

use extendr_api::prelude::*;
use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

static HOOK: Once = Once::new();

/// Replace the default panic hook (which prints to stderr) by one that keeps
/// the message for the error returned to R.
fn install_quiet_panic_hook() {
    HOOK.call_once(|| {
        crate::interrupt::install();
        std::panic::set_hook(Box::new(|info| {
            let msg = if let Some(s) = info.payload().downcast_ref::<&str>() {
                (*s).to_string()
            } else if let Some(s) = info.payload().downcast_ref::<String>() {
                s.clone()
            } else {
                "unknown panic".to_string()
            };
            let loc = info
                .location()
                .map(|l| format!(" at {}:{}", l.file(), l.line()))
                .unwrap_or_default();
            LAST_PANIC.with(|p| *p.borrow_mut() = Some(format!("{msg}{loc}")));
        }));
    });
}

/// Text for R from the engine (names and strings read from files). R
/// strings cannot hold NUL, and making one raises an R error that jumps
/// over the Rust frames, leaving the locks and borrows they hold taken (a
/// later call on the object then waits for ever); each NUL is written `\0`.
pub fn out(s: &str) -> String {
    s.replace('\0', "\\0")
}

/// An error value for R: `list(message =, class =)` with class `ggmlR_rust_error`.
pub fn error_robj(message: &str, class: Option<&str>) -> Robj {
    // R strings cannot hold NUL (a name read from a damaged file may).
    let message = out(message);
    let message = message.as_str();
    let cls: Robj = match class {
        Some(c) => c.into(),
        None => Robj::from(()),
    };
    let mut l = list!(message = message, class = cls);
    l.set_class(["ggmlR_rust_error"]).ok();
    l.into()
}

/// Run `f`, converting its error or panic into an error value for R.
pub fn guard<F>(f: F) -> Robj
where
    F: FnOnce() -> anyhow::Result<Robj>,
{
    install_quiet_panic_hook();
    let out = run(f);
    crate::logging::drain();
    out
}

fn run<F>(f: F) -> Robj
where
    F: FnOnce() -> anyhow::Result<Robj>,
{
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            let class = ggmlr_core::base::error::class_of(&e);
            if class == Some(ggmlr_core::base::cancel::INTERRUPT_CLASS) {
                // The engine stopped for a Ctrl-C: R signals it (see .rs()).
                crate::interrupt::consume();
            }
            error_robj(&format!("{e:#}"), class)
        }
        Err(payload) => {
            // An allocation refused deep in the engine (see base::alloc::Refused).
            if let Some(r) = payload.downcast_ref::<ggmlr_core::base::alloc::Refused>() {
                return error_robj(&r.0, None);
            }
            let detail = LAST_PANIC
                .with(|p| p.borrow_mut().take())
                .unwrap_or_else(|| "unknown panic".into());
            ggmlr_core::base::log::abort(&detail);
            error_robj(
                &format!(
                    "internal error in ggmlR's engine ({detail}); the operation was \
                     abandoned and the session is intact. Please report this."
                ),
                Some("ggmlR_internal_error"),
            )
        }
    }
}
