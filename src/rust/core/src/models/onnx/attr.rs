//! Reading node attributes with their defaults. Writers differ in the type
//! they give an attribute (an int for a float, one int for a list); the
//! readers accept the evident conversions.

use super::init::Init;
use super::model::{Attr, OnnxGraph, OnnxNode};
use std::sync::Arc;

impl OnnxNode {
    pub fn has(&self, name: &str) -> bool {
        self.attrs.contains_key(name)
    }

    /// An int attribute, or `default`.
    pub fn int(&self, name: &str, default: i64) -> i64 {
        match self.attrs.get(name) {
            Some(Attr::I(v)) => *v,
            Some(Attr::F(v)) => *v as i64,
            Some(Attr::Is(v)) if v.len() == 1 => v.first().copied().unwrap_or(default),
            _ => default,
        }
    }

    /// A float attribute, or `default`.
    pub fn float(&self, name: &str, default: f32) -> f32 {
        match self.attrs.get(name) {
            Some(Attr::F(v)) => *v,
            Some(Attr::I(v)) => *v as f32,
            Some(Attr::Fs(v)) if v.len() == 1 => v.first().copied().unwrap_or(default),
            _ => default,
        }
    }

    /// A string attribute, or `default` (also when it is not a string).
    pub fn string(&self, name: &str, default: &str) -> String {
        match self.attrs.get(name) {
            Some(Attr::S(s)) => s.clone(),
            _ => default.to_string(),
        }
    }

    /// An ints attribute (one int counts as a list of one).
    pub fn ints(&self, name: &str) -> Option<Vec<i64>> {
        match self.attrs.get(name) {
            Some(Attr::Is(v)) => Some(v.clone()),
            Some(Attr::I(v)) => Some(vec![*v]),
            Some(Attr::Fs(v)) => Some(v.iter().map(|&x| x as i64).collect()),
            _ => None,
        }
    }

    /// A floats attribute (one float counts as a list of one).
    pub fn floats(&self, name: &str) -> Option<Vec<f32>> {
        match self.attrs.get(name) {
            Some(Attr::Fs(v)) => Some(v.clone()),
            Some(Attr::F(v)) => Some(vec![*v]),
            Some(Attr::Is(v)) => Some(v.iter().map(|&x| x as f32).collect()),
            _ => None,
        }
    }

    pub fn strings(&self, name: &str) -> Option<Vec<String>> {
        match self.attrs.get(name) {
            Some(Attr::Ss(v)) => Some(v.clone()),
            Some(Attr::S(s)) => Some(vec![s.clone()]),
            _ => None,
        }
    }

    pub fn tensor(&self, name: &str) -> Option<&Arc<Init>> {
        match self.attrs.get(name) {
            Some(Attr::T(t)) => Some(t),
            _ => None,
        }
    }

    pub fn graph(&self, name: &str) -> Option<&Arc<OnnxGraph>> {
        match self.attrs.get(name) {
            Some(Attr::G(g)) => Some(g),
            _ => None,
        }
    }
}
