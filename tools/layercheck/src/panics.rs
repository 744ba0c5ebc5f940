//! Calls that panic on a bad value (`.unwrap()`, `.expect(..)`) in a crate's
//! non-test code. Each one must be unreachable, and say why in a comment
//! marked `INVARIANT:` on its line or on one of the [`REACH`] lines above it
//! (a length checked just above, a lock whose poisoning is handled elsewhere,
//! a value built locally); anything input can reach returns an error instead.

use std::path::PathBuf;

/// How many lines above a call its `INVARIANT:` comment may stand.
pub const REACH: usize = 4;

/// The marker of a comment that proves a panic unreachable.
pub const MARKER: &str = "INVARIANT:";

/// The calls counted: the method calls that panic on `None`/`Err`, and the
/// macros that panic outright.
pub const CALLS: [&str; 6] = [".unwrap()", ".expect(", "panic!(", "unreachable!(", "todo!(", "unimplemented!("];

/// One `.unwrap()` / `.expect(` in non-test code.
#[derive(Debug, Clone, PartialEq)]
pub struct Site {
    pub path: PathBuf,
    /// 1-based line.
    pub line: usize,
    pub call: &'static str,
    /// Whether an `INVARIANT:` comment explains it.
    pub justified: bool,
}

/// The panicking calls of one file's text.
pub fn scan(path: &std::path::Path, src: &str) -> Vec<Site> {
    let code = crate::source::code_only(src);
    let lines: Vec<&str> = src.lines().collect();
    let mut out = Vec::new();
    for (n, line) in code.lines().enumerate() {
        for call in CALLS {
            for _ in 0..line.matches(call).count() {
                let lo = n.saturating_sub(REACH);
                let justified = lines
                    .get(lo..=n)
                    .unwrap_or(&[])
                    .iter()
                    .any(|l| l.split_once("//").is_some_and(|(_, c)| c.contains(MARKER)));
                out.push(Site { path: path.to_path_buf(), line: n + 1, call: call.trim_start_matches('.').trim_end_matches(['(', ')']), justified });
            }
        }
    }
    out
}

/// The panicking calls of every non-test file of the crate under `crate_dir`.
pub fn scan_crate(crate_dir: &std::path::Path) -> Result<Vec<Site>, String> {
    let krate = crate::read_crate(&crate_dir.join("src"))?;
    let mut out = Vec::new();
    for f in &krate.files {
        let text = std::fs::read_to_string(&f.path).map_err(|e| format!("{}: {e}", f.path.display()))?;
        out.extend(scan(&f.path, &text));
    }
    Ok(out)
}
