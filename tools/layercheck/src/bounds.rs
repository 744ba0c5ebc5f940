//! Indexing (`x[i]`, `x[a..b]`) in the non-test code of the modules that read
//! bytes from files: each one must be unable to go out of bounds on any
//! input, and say why in a comment marked `BOUNDS:` on its line or on one of
//! the [`crate::panics::REACH`] lines above it (the check that makes it
//! safe); anything else uses checked access (`get`, `chunks_exact`,
//! `first_chunk`) and returns an error.

use std::path::{Path, PathBuf};

/// The modules gated, relative to the workspace root: the readers of GGUF,
/// saved-model, ncnn and ONNX files and the decoding of their tensors.
pub const READERS: [&str; 15] = [
    "src/rust/core/src/gguf/mod.rs",
    "src/rust/core/src/gguf/reader.rs",
    "src/rust/core/src/gguf/value.rs",
    "src/rust/core/src/savefile/read.rs",
    "src/rust/core/src/savefile/value.rs",
    "src/rust/core/src/ncnn/param.rs",
    "src/rust/core/src/ncnn/modelbin.rs",
    "src/rust/core/src/models/onnx/proto_gen.rs",
    "src/rust/core/src/models/onnx/init.rs",
    "src/rust/core/src/models/onnx/attr.rs",
    "src/rust/core/src/models/onnx/elem.rs",
    "src/rust/core/src/models/onnx/load.rs",
    "src/rust/core/src/models/onnx/lowp.rs",
    "src/rust/core/src/models/onnx/proto.rs",
    "src/rust/core/src/models/onnx/val.rs",
];

/// The marker of a comment that proves an index in bounds.
pub const MARKER: &str = "BOUNDS:";

/// One index expression in non-test code.
#[derive(Debug, Clone, PartialEq)]
pub struct Site {
    pub path: PathBuf,
    /// 1-based line.
    pub line: usize,
    /// Whether a `BOUNDS:` comment explains it.
    pub justified: bool,
}

/// Whether the `[` at byte `k` of `line` (code only) indexes a value: it
/// follows a name, a call's `)` or another index's `]`, not `#`, `!`, `&`,
/// `<`, `:`, `=`, `(`, `,` or a space (attributes, macros, slices, types,
/// array literals and patterns).
fn indexes(line: &[u8], k: usize) -> bool {
    k > 0 && matches!(line[k - 1], b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b')' | b']')
}

/// The index expressions of one file's text.
pub fn scan(path: &Path, src: &str) -> Vec<Site> {
    let code = crate::source::code_only(src);
    let lines: Vec<&str> = src.lines().collect();
    let mut out = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let b = line.as_bytes();
        for _ in (0..b.len()).filter(|&k| b[k] == b'[' && indexes(b, k)) {
            let lo = n.saturating_sub(crate::panics::REACH);
            let justified = lines
                .get(lo..=n)
                .unwrap_or(&[])
                .iter()
                .any(|l| l.split_once("//").is_some_and(|(_, c)| c.contains(MARKER)));
            out.push(Site { path: path.to_path_buf(), line: n + 1, justified });
        }
    }
    out
}

/// The index expressions of the files named (a folder: every `.rs` file in
/// it, test files (`tests.rs`, `*_tests.rs`) left out).
pub fn scan_paths(paths: &[&Path]) -> Result<Vec<Site>, String> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let rd = std::fs::read_dir(p).map_err(|e| format!("{}: {e}", p.display()))?;
            let mut v: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
            v.retain(|f| {
                let name = f.file_name().and_then(|s| s.to_str()).unwrap_or("");
                name.ends_with(".rs") && name != "tests.rs" && !name.ends_with("_tests.rs")
            });
            v.sort();
            files.extend(v);
        } else {
            files.push(p.to_path_buf());
        }
    }
    let mut out = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
        out.extend(scan(f, &text));
    }
    Ok(out)
}
