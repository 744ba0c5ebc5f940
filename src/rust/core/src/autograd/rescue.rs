//! The rescue registry: what must outlive a reset of the residency pool it
//! lives in is registered here, and copied to the host just before that
//! pool is freed (by [`super::pools::reset_pools`]). Two kinds register:
//! gradients in the pass pool still referenced by a tensor or a gradient
//! store (`value.rs`), and the values that the R side made resident through
//! a handle (the binding implements [`Rescue`] for those). Residency itself
//! knows nothing of this.

use crate::residency::Scope;
use anyhow::Result;
use std::cell::RefCell;
use std::rc::{Rc, Weak};

/// Something that lives in a pool and is copied out before the pool goes.
pub trait Rescue {
    /// Copies the value to the host when it lives in one of `scopes`.
    /// Returns whether the entry should stay registered for later resets.
    fn rescue(&self, scopes: &[Scope]) -> Result<bool>;
}

enum Entry {
    /// Registered while someone else holds it (a gradient cell).
    Weak(Weak<dyn Rescue>),
    /// Held by the registry until its pool is reset.
    Held(Scope, Box<dyn Rescue>),
}

thread_local! {
    static REGISTRY: RefCell<Vec<Entry>> = const { RefCell::new(Vec::new()) };
}

/// Registers `r` for as long as something else holds it.
pub fn register_weak(r: &Rc<dyn Rescue>) {
    REGISTRY.with(|reg| {
        let mut reg = reg.borrow_mut();
        reg.retain(|e| !matches!(e, Entry::Weak(w) if w.strong_count() == 0));
        reg.push(Entry::Weak(Rc::downgrade(r)));
    });
}

/// Registers `r`, held here until the next reset of `scope`.
pub fn register_held(scope: Scope, r: Box<dyn Rescue>) {
    REGISTRY.with(|reg| reg.borrow_mut().push(Entry::Held(scope, r)));
}

/// Rescues every registered value that lives in `scopes`; the entries that
/// are done (held ones of these scopes, gradients now on the host, or
/// dropped) leave the registry. On an error the remaining entries stay.
pub fn rescue(scopes: &[Scope]) -> Result<()> {
    let entries = REGISTRY.with(|reg| std::mem::take(&mut *reg.borrow_mut()));
    let mut keep = Vec::with_capacity(entries.len());
    let mut err = None;
    for e in entries {
        if err.is_some() {
            keep.push(e);
            continue;
        }
        let r = match &e {
            Entry::Weak(w) => match w.upgrade() {
                Some(r) => r.rescue(scopes),
                None => Ok(false),
            },
            Entry::Held(scope, r) if scopes.contains(scope) => r.rescue(scopes).map(|_| false),
            Entry::Held(..) => Ok(true),
        };
        match r {
            Ok(true) => keep.push(e),
            Ok(false) => {}
            Err(x) => {
                err = Some(x);
                keep.push(e);
            }
        }
    }
    // Entries registered while rescuing (none today) come after the kept ones.
    REGISTRY.with(|reg| {
        let mut reg = reg.borrow_mut();
        keep.append(&mut reg);
        *reg = keep;
    });
    err.map_or(Ok(()), Err)
}

/// Number of registered entries (for tests).
pub fn len() -> usize {
    REGISTRY.with(|reg| reg.borrow().len())
}
