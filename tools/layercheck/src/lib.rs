//! layercheck: reads a crate's module imports and fails on any import cycle
//! between its files and on any import against the direction declared in
//! the crate's `LAYERS` file.
//!
//! `LAYERS` (beside the crate's `Cargo.toml`) names every top-level module of
//! the crate, one per line, with the top-level modules it may import:
//!
//! ```text
//! # module: what it may import
//! base:
//! layout: base
//! ```
//!
//! Files are the nodes: `a/b.rs` (or `a/b/mod.rs`) is module `a::b`. A file
//! imports another when a `use` tree or a path written in its code resolves
//! there (through `pub use` re-exports). Code under `#[cfg(test)]`, and files
//! declared there, are tests and are not checked.

pub mod bounds;
pub mod names;
pub mod panics;
pub mod source;

use source::FileFacts;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One source file of the crate.
#[derive(Debug)]
pub struct File {
    /// Module path (`["backend", "cpu"]`; empty for the crate root).
    pub module: Vec<String>,
    pub path: PathBuf,
    pub lines: usize,
    facts: FileFacts,
}

/// A crate's files and the imports between them.
#[derive(Debug)]
pub struct Crate {
    pub files: Vec<File>,
    /// Edges: (importing file, imported file), indices into `files`.
    pub edges: BTreeSet<(usize, usize)>,
}

/// The declared direction: each top-level module and what it may import,
/// bottom-up as `LAYERS` lists them.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Layers(pub Vec<(String, BTreeSet<String>)>);

impl Layers {
    pub fn get(&self, module: &str) -> Option<&BTreeSet<String>> {
        self.0.iter().find(|(m, _)| m == module).map(|(_, d)| d)
    }
    pub fn contains_key(&self, module: &str) -> bool {
        self.get(module).is_some()
    }
}

/// Parse a `LAYERS` text.
pub fn parse_layers(text: &str) -> Result<Layers, String> {
    let mut out = Layers::default();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let Some((name, deps)) = line.split_once(':') else {
            return Err(format!("LAYERS line {}: expected `module: allowed modules`, got `{line}`", n + 1));
        };
        let deps: BTreeSet<String> = deps.split_whitespace().map(String::from).collect();
        for d in &deps {
            if !out.contains_key(d) {
                return Err(format!(
                    "LAYERS line {}: `{}` may import `{d}`, which is not declared above it (list modules bottom-up)",
                    n + 1,
                    name.trim()
                ));
            }
        }
        out.0.push((name.trim().to_string(), deps));
    }
    Ok(out)
}

fn file_for(dir: &Path, name: &str) -> Option<PathBuf> {
    let flat = dir.join(format!("{name}.rs"));
    let nested = dir.join(name).join("mod.rs");
    if flat.is_file() {
        Some(flat)
    } else if nested.is_file() {
        Some(nested)
    } else {
        None
    }
}

/// Read the crate whose root is `src/lib.rs` (or `src/main.rs`) under `src_dir`'s parent.
pub fn read_crate(src_dir: &Path) -> Result<Crate, String> {
    let root = [src_dir.join("lib.rs"), src_dir.join("main.rs")]
        .into_iter()
        .find(|p| p.is_file())
        .ok_or_else(|| format!("{}: no lib.rs or main.rs", src_dir.display()))?;
    let mut files = Vec::new();
    let mut todo = vec![(Vec::<String>::new(), root, src_dir.to_path_buf())];
    while let Some((module, path, dir)) = todo.pop() {
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let facts = source::read(&text);
        for m in &facts.mods {
            // A `mod x;` without a file is not a module of the tree (the
            // binding's registration macro writes one).
            let Some(child) = file_for(&dir, m) else { continue };
            // `a.rs` and `a/mod.rs` both keep their children in `a/`.
            let child_dir = dir.join(m);
            let mut cm = module.clone();
            cm.push(m.clone());
            todo.push((cm, child, child_dir));
        }
        files.push(File { module, path, lines: text.lines().count(), facts });
    }
    files.sort_by(|a, b| a.module.cmp(&b.module));
    let index: BTreeMap<Vec<String>, usize> = files.iter().enumerate().map(|(i, f)| (f.module.clone(), i)).collect();
    let mut edges = BTreeSet::new();
    for (i, f) in files.iter().enumerate() {
        for p in &f.facts.paths {
            let Some(abs) = absolute(&f.module, &f.facts.mods, p) else { continue };
            if let Some(j) = resolve(&files, &index, &abs, 0) {
                if j != i {
                    edges.insert((i, j));
                }
            }
        }
    }
    Ok(Crate { files, edges })
}

/// The absolute module path a written path starts from, or None for paths
/// into other crates.
fn absolute(module: &[String], children: &[String], p: &[String]) -> Option<Vec<String>> {
    let first = p.first()?.as_str();
    let mut base: Vec<String> = module.to_vec();
    let mut rest = p;
    match first {
        "crate" => {
            base.clear();
            rest = &p[1..];
        }
        "self" => rest = &p[1..],
        "super" => {
            while rest.first().map(String::as_str) == Some("super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        _ if children.iter().any(|c| c == first) => {}
        _ => return None,
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The file a path resolves to: the longest module prefix, following `pub
/// use` re-exports of the item named after it.
fn resolve(files: &[File], index: &BTreeMap<Vec<String>, usize>, abs: &[String], depth: usize) -> Option<usize> {
    let (n, &j) = (0..=abs.len()).rev().find_map(|n| index.get(&abs[..n]).map(|j| (n, j)))?;
    if depth < 16 {
        if let Some(item) = abs.get(n) {
            let f = &files[j];
            if let Some((_, target)) = f.facts.reexports.iter().find(|(name, _)| name == item) {
                if let Some(mut t) = absolute(&f.module, &f.facts.mods, target) {
                    t.extend(abs[n + 1..].iter().cloned());
                    if let Some(k) = resolve(files, index, &t, depth + 1) {
                        return Some(k);
                    }
                }
            }
        }
    }
    Some(j)
}

impl Crate {
    /// "backend::cpu" (or "crate root").
    pub fn name(&self, i: usize) -> String {
        let m = &self.files[i].module;
        if m.is_empty() {
            "crate root".into()
        } else {
            m.join("::")
        }
    }

    fn top(&self, i: usize) -> Option<&str> {
        self.files[i].module.first().map(String::as_str)
    }

    /// Groups of files that import each other in a circle (each sorted by
    /// name), and for each one circle through it.
    pub fn cycles(&self) -> Vec<Vec<usize>> {
        let n = self.files.len();
        let mut adj = vec![Vec::new(); n];
        for &(a, b) in &self.edges {
            adj[a].push(b);
        }
        // Tarjan's strongly connected components, iteratively.
        let mut index = vec![usize::MAX; n];
        let mut low = vec![0; n];
        let mut on = vec![false; n];
        let mut stack = Vec::new();
        let mut next = 0;
        let mut out = Vec::new();
        for s in 0..n {
            if index[s] != usize::MAX {
                continue;
            }
            let mut call = vec![(s, 0usize)];
            index[s] = next;
            low[s] = next;
            next += 1;
            stack.push(s);
            on[s] = true;
            while let Some(&mut (v, ref mut k)) = call.last_mut() {
                if *k < adj[v].len() {
                    let w = adj[v][*k];
                    *k += 1;
                    if index[w] == usize::MAX {
                        index[w] = next;
                        low[w] = next;
                        next += 1;
                        stack.push(w);
                        on[w] = true;
                        call.push((w, 0));
                    } else if on[w] {
                        low[v] = low[v].min(index[w]);
                    }
                } else {
                    call.pop();
                    if let Some(&(u, _)) = call.last() {
                        low[u] = low[u].min(low[v]);
                    }
                    if low[v] == index[v] {
                        let mut comp = Vec::new();
                        while let Some(w) = stack.pop() {
                            on[w] = false;
                            comp.push(w);
                            if w == v {
                                break;
                            }
                        }
                        if comp.len() > 1 {
                            comp.sort();
                            out.push(comp);
                        }
                    }
                }
            }
        }
        out
    }

    /// One circle of imports inside a group found by [`Crate::cycles`].
    pub fn circle(&self, comp: &[usize]) -> Vec<usize> {
        let inside: BTreeSet<usize> = comp.iter().copied().collect();
        let start = comp[0];
        // Breadth-first from start back to start within the group.
        let mut prev: BTreeMap<usize, usize> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start]);
        while let Some(v) = queue.pop_front() {
            for &(a, b) in self.edges.range((v, 0)..(v + 1, 0)) {
                debug_assert_eq!(a, v);
                if !inside.contains(&b) {
                    continue;
                }
                if b == start {
                    let mut path = vec![v];
                    let mut cur = v;
                    while cur != start {
                        cur = prev[&cur];
                        path.push(cur);
                    }
                    path.reverse();
                    return path;
                }
                if let std::collections::btree_map::Entry::Vacant(e) = prev.entry(b) {
                    e.insert(v);
                    queue.push_back(b);
                }
            }
        }
        comp.to_vec()
    }

    /// Every problem: cycles, imports against the declared direction, and
    /// top-level modules missing from `layers`.
    pub fn problems(&self, layers: &Layers) -> Vec<String> {
        let mut out = Vec::new();
        let tops: BTreeSet<&str> = (0..self.files.len()).filter_map(|i| self.top(i)).collect();
        for t in &tops {
            if !layers.contains_key(*t) {
                out.push(format!("module `{t}` is not declared in LAYERS: add it with the modules it may import"));
            }
        }
        for comp in self.cycles() {
            let c = self.circle(&comp);
            let names: Vec<String> = c.iter().chain(c.first()).map(|&i| self.name(i)).collect();
            out.push(format!("import cycle among {} files: {}", comp.len(), names.join(" -> ")));
        }
        for &(a, b) in &self.edges {
            let (Some(ta), Some(tb)) = (self.top(a), self.top(b)) else { continue };
            if ta == tb {
                continue;
            }
            if let Some(allowed) = layers.get(ta) {
                if !allowed.contains(tb) {
                    out.push(format!(
                        "`{}` imports `{}`: `{ta}` may import only {}",
                        self.name(a),
                        self.name(b),
                        if allowed.is_empty() { "itself".to_string() } else { allowed.iter().cloned().collect::<Vec<_>>().join(", ") }
                    ));
                }
            }
        }
        out
    }

    /// The module tree: each top-level module with its files' line count.
    pub fn tree(&self, layers: &Layers) -> String {
        let mut lines: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
        for (i, f) in self.files.iter().enumerate() {
            if let Some(t) = self.top(i) {
                let e = lines.entry(t).or_default();
                e.0 += 1;
                e.1 += f.lines;
            }
        }
        let mut out = String::new();
        for (name, deps) in &layers.0 {
            let (n, l) = lines.get(name.as_str()).copied().unwrap_or_default();
            let deps: Vec<&str> = deps.iter().map(String::as_str).collect();
            out.push_str(&format!("{name:<12} {n:>3} files {l:>6} lines  imports: {}\n", if deps.is_empty() { "-".into() } else { deps.join(", ") }));
        }
        out
    }
}

/// Check the crate at `crate_dir` (with `src/` and `LAYERS`): the problems found.
pub fn check(crate_dir: &Path) -> Result<(Crate, Layers, Vec<String>), String> {
    let layers_path = crate_dir.join("LAYERS");
    let text = std::fs::read_to_string(&layers_path).map_err(|e| format!("{}: {e}", layers_path.display()))?;
    let layers = parse_layers(&text)?;
    let krate = read_crate(&crate_dir.join("src"))?;
    let problems = krate.problems(&layers);
    Ok((krate, layers, problems))
}

#[cfg(test)]
mod tests;
