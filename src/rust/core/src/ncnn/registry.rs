//! Per-net registry of custom layer factories, with ncnn's keys and rules:
//! names vs indices, builtin overrides, custom slots and the 256 custom bit.

use crate::ncnn::types::{self, CUSTOM_BIT};
use crate::ncnn::{err, Layer};
use std::rc::Rc;

/// Makes and destroys custom layers (implemented by the binding).
pub trait CustomFactory {
    /// A new layer, or an error (e.g. the creator did not return a layer).
    fn create(&self) -> anyhow::Result<Box<dyn Layer>>;
    /// Called for every layer the net destroys, by the key's current factory,
    /// whichever factory made the layer.
    fn destroy(&self, layer: Box<dyn Layer>);
}

/// How a layer type resolves: the registry entry that owns it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RegKey {
    /// An override of builtin type index `i`.
    Override(i32),
    /// Custom slot `s` (type index `256 | s`).
    Slot(usize),
}

#[derive(Default)]
struct SlotEntry {
    name: Option<String>,
    factory: Option<Rc<dyn CustomFactory>>,
}

/// A layer-type key given by the user: a name or a type index.
pub enum TypeKey<'a> {
    Name(&'a str),
    Index(i64),
}

#[derive(Default)]
pub struct Registry {
    overrides: Vec<(i32, Rc<dyn CustomFactory>)>,
    slots: Vec<SlotEntry>,
}

const INDEX_LIMIT: i64 = 1_000_000 + CUSTOM_BIT as i64;

impl Registry {
    /// Register `factory` under `key`; returns the entry it now owns. A
    /// rejected registration keeps nothing (the factory is dropped).
    pub fn register(
        &mut self,
        key: TypeKey,
        factory: Rc<dyn CustomFactory>,
    ) -> anyhow::Result<RegKey> {
        match key {
            TypeKey::Name(name) => {
                if name.is_empty() {
                    return Err(err("a custom layer type name must not be empty"));
                }
                if let Some(i) = types::index_of(name) {
                    return Ok(self.set_override(i as i32, factory));
                }
                if let Some(s) = self
                    .slots
                    .iter()
                    .position(|e| e.name.as_deref() == Some(name))
                {
                    // BOUNDS: s is a position found in self.slots.
                    self.slots[s].factory = Some(factory);
                    return Ok(RegKey::Slot(s));
                }
                let s = self.slots.len();
                if s & CUSTOM_BIT as usize != 0 {
                    return Err(err(format!(
                        "cannot register custom layer type '{name}': its slot {s} would need type index {}, which cannot be encoded (the custom bit 256 is already set); register fewer names or reuse an existing one",
                        s | CUSTOM_BIT as usize
                    )));
                }
                self.slots.push(SlotEntry {
                    name: Some(name.to_string()),
                    factory: Some(factory),
                });
                Ok(RegKey::Slot(s))
            }
            TypeKey::Index(index) => {
                if index < 0 || index >= INDEX_LIMIT {
                    return Err(err(format!(
                        "cannot register custom layer type index {index}: indices go from 0 to {}",
                        INDEX_LIMIT - 1
                    )));
                }
                let index = index as i32;
                if index & CUSTOM_BIT == 0 {
                    return Ok(self.set_override(index, factory));
                }
                let s = (index & !CUSTOM_BIT) as usize;
                if self.slots.len() <= s {
                    self.slots.resize_with(s + 1, SlotEntry::default);
                }
                // BOUNDS: slots was just grown to more than s entries.
                self.slots[s].factory = Some(factory);
                Ok(RegKey::Slot(s))
            }
        }
    }

    fn set_override(&mut self, index: i32, factory: Rc<dyn CustomFactory>) -> RegKey {
        if let Some(e) = self.overrides.iter_mut().find(|e| e.0 == index) {
            e.1 = factory;
        } else {
            self.overrides.push((index, factory));
        }
        RegKey::Override(index)
    }

    /// The factory currently registered for `key`.
    pub fn factory(&self, key: RegKey) -> Option<Rc<dyn CustomFactory>> {
        match key {
            RegKey::Override(i) => self
                .overrides
                .iter()
                .find(|e| e.0 == i)
                .map(|e| e.1.clone()),
            RegKey::Slot(s) => self.slots.get(s).and_then(|e| e.factory.clone()),
        }
    }

    /// The registered entry a text-param type name resolves to, if any
    /// (override of a builtin name, else a custom name).
    pub fn lookup_name(&self, name: &str) -> Option<RegKey> {
        if let Some(i) = types::index_of(name) {
            return self
                .overrides
                .iter()
                .find(|e| e.0 == i as i32)
                .map(|e| RegKey::Override(e.0));
        }
        self.slots
            .iter()
            .position(|e| e.name.as_deref() == Some(name) && e.factory.is_some())
            .map(RegKey::Slot)
    }

    /// The override for a builtin index, if any.
    pub fn lookup_override(&self, index: i32) -> Option<RegKey> {
        self.overrides
            .iter()
            .find(|e| e.0 == index)
            .map(|e| RegKey::Override(e.0))
    }

    /// The custom slot a binary type index resolves to, if filled.
    pub fn lookup_slot(&self, index: i32) -> Option<RegKey> {
        let s = (index & !CUSTOM_BIT) as usize;
        self.slots
            .get(s)
            .filter(|e| e.factory.is_some())
            .map(|_| RegKey::Slot(s))
    }

    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }
}
