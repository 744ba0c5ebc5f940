//! Indexing (`x[i]`, `x[a..b]`) in the non-test code of the modules that read
//! bytes from files: each one must be unable to go out of bounds on any
//! input, and say why in a comment marked `BOUNDS:` on its line or on one of
//! the [`crate::panics::REACH`] lines above it (the check that makes it
//! safe); anything else uses checked access (`get`, `chunks_exact`,
//! `first_chunk`) and returns an error.
//!
//! In the engine's op rules and kernels, ncnn layers and ONNX host ops
//! ([`GATED`]) a function whose every index is bounded by one invariant may
//! state it once, in a comment marked `BOUNDS-FN:` on its `fn` line, one of
//! the [`crate::panics::REACH`] lines above it or the comment block just
//! above it ("shapes validated by
//! `rules::x` before this kernel runs"); it covers the indexes of that
//! function's body only, so a new function needs its own proof.

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

/// Folders gated whole (each `.rs` file in them, not their subfolders):
/// the engine's op rules, and each further folder once every index in it is
/// checked or proved.
pub const GATED: &[&str] = &[
    "src/rust/core/src/op",
    "src/rust/core/src/models/onnx",
    "src/rust/core/src/models/onnx/run",
    "src/rust/core/src/models/onnx/ops",
    "src/rust/core/src/ncnn/layers",
    "src/rust/core/src/ncnn/layers/kernels",
    "src/rust/core/src/backend",
    "src/rust/core/src/backend/vulkan",
    "src/rust/core/src/backend/meta",
    "src/rust/core/src/graph",
    "src/rust/core/src/graph/sched",
    "src/rust/core/src/graph/gallocr",
    "src/rust/core/src/memory",
    "src/rust/core/src/tensor",
    "src/rust/core/src/ncnn",
    "src/rust/core/src/autograd",
    "src/rust/core/src",
    "src/rust/core/src/base",
    "src/rust/core/src/base/quant",
    "src/rust/core/src/backend/cpu",
    "src/rust/core/src/backend/cpu/quantized",
    "src/rust/core/src/layout",
    "src/rust/core/src/residency",
    "src/rust/core/src/savefile",
    "src/rust/core/src/gguf",
    "src/rust/core/src/models",
    "src/rust/ggmlr/src",
];

/// Single files gated ahead of their folder (whose other files are not
/// checked yet): none today, every engine folder is gated whole or not at
/// all.
pub const FILES: &[&str] = &[
];

/// Everything the gate checks: the readers, the gated folders and the
/// single files.
pub fn gated() -> impl Iterator<Item = &'static str> {
    READERS.iter().chain(GATED.iter()).chain(FILES.iter()).copied()
}

/// Files of the gated folders not checked yet: the gate leaves their index
/// expressions out (`layercheck --bounds FILE` still lists them).
pub const PENDING: &[&str] = &[];

/// Whether `site` lies in one of the [`PENDING`] files.
pub fn pending(site: &Site) -> bool {
    PENDING.iter().any(|p| site.path.ends_with(p))
}

/// The marker of a comment that proves an index in bounds.
pub const MARKER: &str = "BOUNDS:";

/// The marker of a comment that proves every index of one function in bounds.
pub const FN_MARKER: &str = "BOUNDS-FN:";

/// Whether one of the lines `lo..=n` of `lines` has a comment with `marker`.
fn marked(lines: &[&str], lo: usize, n: usize, marker: &str) -> bool {
    lines.get(lo..=n).unwrap_or(&[]).iter().any(|l| l.split_once("//").is_some_and(|(_, c)| c.contains(marker)))
}

/// The first line of the run of comment and attribute lines just above
/// line `n` (`n` itself when there is none): a function's proof may be
/// anywhere in the comment block that introduces it.
fn comments_above(lines: &[&str], n: usize) -> usize {
    let mut lo = n;
    while lo > 0 && lines.get(lo - 1).is_some_and(|l| matches!(l.trim_start().get(..2), Some("//" | "#["))) {
        lo -= 1;
    }
    lo
}

/// The line ranges (0-based, inclusive) of the bodies of the functions whose
/// `fn` line carries a `BOUNDS-FN:` comment or has one within
/// [`crate::panics::REACH`] lines above it. `code` is the file's code only
/// (comments and literals blanked), `lines` its source lines.
fn proved_fns(code: &str, lines: &[&str]) -> Vec<(usize, usize)> {
    let b = code.as_bytes();
    let line_of = |k: usize| b.iter().take(k).filter(|&&c| c == b'\n').count();
    let word = |k: usize| k < b.len() && (b[k].is_ascii_alphanumeric() || b[k] == b'_');
    let mut out = Vec::new();
    let mut k = 0;
    while let Some(off) = code.get(k..).and_then(|t| t.find("fn ")) {
        let at = k + off;
        k = at + 3;
        if at > 0 && word(at - 1) {
            continue;
        }
        let n = line_of(at);
        if !marked(lines, n.saturating_sub(crate::panics::REACH).min(comments_above(lines, n)), n, FN_MARKER) {
            continue;
        }
        // The body: from the first `{` after the signature outside its
        // parentheses and brackets (a `;` there first means a declaration
        // without one) to its matching `}`.
        let mut nest = 0usize;
        let mut open = None;
        for (j, &c) in b.iter().enumerate().skip(at) {
            match c {
                b'(' | b'[' => nest += 1,
                b')' | b']' => nest = nest.saturating_sub(1),
                b'{' | b';' if nest == 0 => {
                    open = Some((j, c));
                    break;
                }
                _ => {}
            }
        }
        let Some((open, b'{')) = open else { continue };
        let mut depth = 0usize;
        let mut end = b.len().saturating_sub(1);
        for (j, &c) in b.iter().enumerate().skip(open) {
            match c {
                b'{' => depth += 1,
                b'}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = j;
                        break;
                    }
                }
                _ => {}
            }
        }
        out.push((n, line_of(end)));
    }
    out
}

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
    let fns = proved_fns(&code, &lines);
    let mut out = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let b = line.as_bytes();
        for _ in (0..b.len()).filter(|&k| b[k] == b'[' && indexes(b, k)) {
            let justified = marked(&lines, n.saturating_sub(crate::panics::REACH), n, MARKER)
                || fns.iter().any(|&(lo, hi)| (lo..=hi).contains(&n));
            out.push(Site { path: path.to_path_buf(), line: n + 1, justified });
        }
    }
    out
}

/// The child modules that the module owning folder `dir` (`dir.rs` beside
/// it, or `dir/mod.rs`) declares under `#[cfg(test)]`: test code.
fn test_mods_of(dir: &Path) -> Vec<String> {
    let owner = [dir.with_extension("rs"), dir.join("mod.rs")];
    owner.iter().filter_map(|f| std::fs::read_to_string(f).ok()).flat_map(|src| crate::source::read(&src).test_mods).collect()
}

/// The index expressions of the files named (a folder: every `.rs` file in
/// it, test files (`tests.rs`, `*_tests.rs`, modules declared under
/// `#[cfg(test)]` by the folder's owner) left out).
pub fn scan_paths(paths: &[&Path]) -> Result<Vec<Site>, String> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let rd = std::fs::read_dir(p).map_err(|e| format!("{}: {e}", p.display()))?;
            let mut v: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
            let test_mods = test_mods_of(p);
            v.retain(|f| {
                let name = f.file_name().and_then(|s| s.to_str()).unwrap_or("");
                let stem = name.strip_suffix(".rs").unwrap_or("");
                name.ends_with(".rs") && name != "tests.rs" && !name.ends_with("_tests.rs") && !test_mods.iter().any(|m| m == stem)
            });
            v.sort();
            files.extend(v);
        } else {
            files.push(p.to_path_buf());
        }
    }
    // A file named twice (a reader inside a gated folder) is scanned once.
    files.sort();
    files.dedup();
    let mut out = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
        out.extend(scan(f, &text));
    }
    Ok(out)
}
