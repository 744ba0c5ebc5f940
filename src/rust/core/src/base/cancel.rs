//! Cancellation of long computations (the user pressed Ctrl-C).
//!
//! The engine knows nothing of R: the binding installs one [`Cancel`] trait
//! object for the process. Long loops (graph nodes, ncnn layers, chunks of
//! large kernels) ask [`requested`] between steps, which is a cheap read of a
//! flag and may be asked from any thread; the loop that owns the computation
//! turns a request into the error of [`check`], of class
//! [`INTERRUPT_CLASS`], which the binding signals as R's own interrupt. Work
//! stops between steps, so every buffer, net and tape is left consistent.

use std::sync::OnceLock;

/// The R condition class of an interrupted computation.
pub const INTERRUPT_CLASS: &str = "interrupt";

/// The class of a computation abandoned because code it called back asked
/// to leave for the top level (R's `invokeRestart("abort")`).
pub const ABORT_CLASS: &str = "ggmlR_abort";

/// Whether the user asked to stop. Implementations must be cheap and
/// callable from any thread (read a flag; never call into an interpreter).
pub trait Cancel: Send + Sync {
    fn requested(&self) -> bool;
}

static HOOK: OnceLock<Box<dyn Cancel>> = OnceLock::new();

/// Install the process's cancellation source (once; later calls are ignored).
pub fn install(c: Box<dyn Cancel>) {
    let _ = HOOK.set(c);
}

/// Whether a stop was requested (false when no source is installed).
pub fn requested() -> bool {
    HOOK.get().is_some_and(|c| c.requested())
}

/// The error returned by an interrupted computation.
pub fn interrupted() -> anyhow::Error {
    super::error::Classed::new(INTERRUPT_CLASS, "interrupted by the user")
}

/// `Err(interrupted())` when a stop was requested.
pub fn check() -> crate::Result<()> {
    if requested() {
        return Err(interrupted());
    }
    Ok(())
}

/// The error of a computation whose callback asked to leave for the top level.
pub fn aborted() -> anyhow::Error {
    super::error::Classed::new(ABORT_CLASS, "abandoned: a callback asked to return to the top level")
}

/// Whether `e` (or its cause) is an interruption or an abort, which must
/// reach the caller unchanged (not rewrapped as an ordinary error).
pub fn is_interrupt(e: &anyhow::Error) -> bool {
    matches!(super::error::class_of(e), Some(INTERRUPT_CLASS | ABORT_CLASS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interruption_is_classed() {
        let e = interrupted().context("computing node 3");
        assert!(is_interrupt(&e));
        assert!(!is_interrupt(&anyhow::anyhow!("plain")));
    }
}
