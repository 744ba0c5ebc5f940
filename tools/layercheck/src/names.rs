//! One name for one thing: no two public types (`pub struct`, `pub enum`,
//! `pub type`, `pub trait`) of a crate share a name, wherever in its module
//! tree they stand, so that a name read anywhere means one type.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The kinds of item counted.
pub const KINDS: [&str; 4] = ["struct", "enum", "type", "trait"];

/// The public type names a file's text defines, with their 1-based lines
/// (comments and string literals do not count).
pub fn scan(src: &str) -> Vec<(String, usize)> {
    let code = crate::source::blank_comments_and_literals(src);
    let mut out = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let Some(rest) = line.trim_start().strip_prefix("pub ") else { continue };
        for kind in KINDS {
            if let Some(after) = rest.strip_prefix(kind).and_then(|r| r.strip_prefix(' ')) {
                let name: String = after.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                if !name.is_empty() {
                    out.push((name, n + 1));
                }
            }
        }
    }
    out
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            rust_files(&p, out)?;
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
    Ok(())
}

/// The public type names defined more than once under `src_dir`, each with
/// every `path:line` that defines it.
pub fn duplicates(src_dir: &Path) -> Result<BTreeMap<String, Vec<String>>, String> {
    let mut files = Vec::new();
    rust_files(src_dir, &mut files)?;
    let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for f in &files {
        let text = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
        let rel = f.strip_prefix(src_dir).unwrap_or(f);
        for (name, line) in scan(&text) {
            seen.entry(name).or_default().push(format!("{}:{line}", rel.display()));
        }
    }
    seen.retain(|_, places| places.len() > 1);
    Ok(seen)
}
