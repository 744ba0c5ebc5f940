//! Strings from R, checked. R strings are bytes in some encoding and need not
//! be valid UTF-8 (`rawToChar(as.raw(0xff))`, a binary file read as text);
//! extendr's `as_str()` assumes they are, which is undefined behaviour and
//! crashed the session. Every string the binding reads comes through here:
//! Latin-1 strings are converted, "bytes" strings and invalid UTF-8 are an
//! error naming the argument.

use anyhow::bail;
use extendr_api::prelude::*;
use std::os::raw::{c_char, c_int};

type Sexp = *mut std::ffi::c_void;

// R's C API (libR), declared here for the few calls extendr does not wrap.
extern "C" {
    fn R_CHAR(x: Sexp) -> *const c_char;
    fn Rf_xlength(x: Sexp) -> isize;
    fn Rf_getCharCE(x: Sexp) -> c_int;
    fn STRING_ELT(x: Sexp, i: isize) -> Sexp;
    static R_NaString: Sexp;
}

const CE_LATIN1: c_int = 2;
const CE_BYTES: c_int = 3;

/// Element `i` of the character vector `x` (None for NA).
fn elt(x: &Robj, i: usize, what: &str) -> anyhow::Result<Option<String>> {
    // SAFETY: `x` is a live character vector (checked by the callers) and
    // `i < x.len()`; the CHARSXP's bytes are read, never written, while `x`
    // (which protects them) is borrowed.
    unsafe {
        let s = STRING_ELT(x.get() as Sexp, i as isize);
        if s == R_NaString {
            return Ok(None);
        }
        let n = Rf_xlength(s).max(0) as usize;
        let p = R_CHAR(s) as *const u8;
        let bytes: &[u8] = if n == 0 { &[] } else { std::slice::from_raw_parts(p, n) };
        match Rf_getCharCE(s) {
            CE_LATIN1 => Ok(Some(bytes.iter().map(|&b| b as char).collect())),
            CE_BYTES => bail!("`{what}` is a string of encoding \"bytes\"; give text (see enc2utf8())"),
            _ => match std::str::from_utf8(bytes) {
                Ok(t) => Ok(Some(t.to_string())),
                Err(e) => bail!(
                    "`{what}` is not valid UTF-8 text (byte {} is not part of a character); \
                     give text, not binary data (see validUTF8() and iconv())",
                    e.valid_up_to() + 1
                ),
            },
        }
    }
}

/// Every element of a character vector (None for NA); an error when `x` is
/// not one or an element is not text.
pub fn strings(x: &Robj, what: &str) -> anyhow::Result<Vec<Option<String>>> {
    if !x.is_string() {
        bail!("`{what}` must be a character vector");
    }
    (0..x.len()).map(|i| elt(x, i, what)).collect()
}

/// A single, non-NA string.
pub fn scalar(x: &Robj, what: &str) -> anyhow::Result<String> {
    if !x.is_string() || x.len() != 1 {
        bail!("`{what}` must be a single string");
    }
    match elt(x, 0, what)? {
        Some(s) => Ok(s),
        None => bail!("`{what}` must be a string, not NA"),
    }
}

/// A single string, or None when `x` is not one. Invalid bytes become
/// U+FFFD: for messages coming back from R code, which must not fail.
pub fn lossy(x: &Robj) -> Option<String> {
    if !x.is_string() || x.len() != 1 {
        return None;
    }
    // SAFETY: as in `elt`.
    unsafe {
        let s = STRING_ELT(x.get() as Sexp, 0);
        if s == R_NaString {
            return Some("NA".into());
        }
        let n = Rf_xlength(s).max(0) as usize;
        let p = R_CHAR(s) as *const u8;
        let bytes: &[u8] = if n == 0 { &[] } else { std::slice::from_raw_parts(p, n) };
        Some(String::from_utf8_lossy(bytes).into_owned())
    }
}
