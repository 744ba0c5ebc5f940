//! Error conventions of the engine.
//!
//! Every fallible engine function returns [`Result`] (an `anyhow::Result`).
//! Messages are written for R users: they say what was wrong (naming tensors,
//! shapes, sizes, devices) and what to do about it. When an error must reach R
//! with a particular condition class (for example `ncnn_error`), wrap it in
//! [`Classed`]; the binding crate finds it with `downcast_ref`.

use std::fmt;

pub type Result<T> = anyhow::Result<T>;

/// An error that asks to be signalled in R with an extra condition class.
#[derive(Debug, Clone)]
pub struct Classed {
    pub class: &'static str,
    pub message: String,
}

impl Classed {
    pub fn new(class: &'static str, message: impl Into<String>) -> anyhow::Error {
        anyhow::Error::new(Classed { class, message: message.into() })
    }
}

impl fmt::Display for Classed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Classed {}

/// The R condition class asked for by `err`, if any (searched through the chain).
pub fn class_of(err: &anyhow::Error) -> Option<&'static str> {
    err.chain()
        .find_map(|e| e.downcast_ref::<Classed>())
        .map(|c| c.class)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_survives_context() {
        let e = Classed::new("ncnn_error", "bad param").context("loading net");
        assert_eq!(class_of(&e), Some("ncnn_error"));
        assert_eq!(format!("{:#}", e), "loading net: bad param");
        assert_eq!(class_of(&anyhow::anyhow!("plain")), None);
    }
}
