//! The checker on small crates written to a temporary folder, and on the
//! package's own crates.

use super::*;

/// A crate in a fresh temporary folder: `files` are (path under src, text).
fn write_crate(name: &str, layers: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("layercheck-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for (p, text) in files {
        let path = dir.join("src").join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    std::fs::write(dir.join("LAYERS"), layers).unwrap();
    dir
}

const LAYERS: &str = "base:\ntensor: base\ngraph: base tensor\n";

fn layered(extra_base: &str) -> Vec<(&'static str, String)> {
    vec![
        ("lib.rs", "pub mod base;\npub mod tensor;\npub mod graph;\n".into()),
        ("base/mod.rs", "pub mod dtype;\npub mod fmt;\npub use dtype::DType;\n".into()),
        ("base/dtype.rs", format!("pub enum DType {{ F32 }}\n{extra_base}")),
        ("base/fmt.rs", "use super::DType;\npub fn f(_: DType) {}\n".into()),
        ("tensor/mod.rs", "use crate::base::DType;\npub struct Tensor(pub DType);\n#[cfg(test)]\nmod tests;\n".into()),
        ("tensor/tests.rs", "use crate::graph::Graph;\n".into()),
        ("graph/mod.rs", "use crate::tensor::Tensor;\npub struct Graph(Vec<Tensor>);\nfn g() { crate::base::fmt::f(crate::base::DType::F32); }\n".into()),
    ]
}

fn run(name: &str, files: &[(&'static str, String)]) -> (Crate, Vec<String>) {
    let files: Vec<(&str, &str)> = files.iter().map(|(p, t)| (*p, t.as_str())).collect();
    let dir = write_crate(name, LAYERS, &files);
    let (k, _, problems) = check(&dir).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    (k, problems)
}

#[test]
fn a_layered_crate_passes() {
    let (k, problems) = run("ok", &layered(""));
    assert!(problems.is_empty(), "{problems:?}");
    // graph -> tensor, graph -> base::fmt, graph -> base::dtype (through the
    // re-export), tensor -> base::dtype; the test file is not read.
    let names: BTreeSet<(String, String)> = k.edges.iter().map(|&(a, b)| (k.name(a), k.name(b))).collect();
    assert!(names.contains(&("graph".into(), "base::dtype".into())), "{names:?}");
    assert!(names.contains(&("tensor".into(), "base::dtype".into())), "{names:?}");
    assert!(!names.iter().any(|(a, _)| a.contains("tests")), "{names:?}");
}

#[test]
fn a_back_edge_fails() {
    let (_, problems) = run("back", &layered("fn up() -> crate::graph::Graph { todo!() }\n"));
    assert!(problems.iter().any(|p| p.contains("`base::dtype` imports `graph`: `base` may import only itself")), "{problems:?}");
}

#[test]
fn a_back_edge_by_use_fails() {
    let (_, problems) = run("back-use", &layered("use crate::tensor::{Tensor as T};\n"));
    assert!(problems.iter().any(|p| p.contains("`base::dtype` imports `tensor`")), "{problems:?}");
}

#[test]
fn a_cycle_inside_a_layer_fails() {
    let mut files = layered("use super::fmt::f;\n");
    files[3].1 = "use super::dtype::DType;\npub fn f(_: DType) {}\n".into();
    let (_, problems) = run("cycle", &files);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].starts_with("import cycle among 2 files"), "{problems:?}");
    assert!(problems[0].contains("base::dtype -> base::fmt -> base::dtype"), "{problems:?}");
}

#[test]
fn an_undeclared_module_fails() {
    let mut files = layered("");
    files[0].1.push_str("pub mod extra;\n");
    files.push(("extra.rs", "".into()));
    let (_, problems) = run("undeclared", &files);
    assert!(problems.iter().any(|p| p.contains("`extra` is not declared")), "{problems:?}");
}

#[test]
fn layers_must_be_listed_bottom_up() {
    assert!(parse_layers("a: b\nb:\n").unwrap_err().contains("not declared above"));
    assert_eq!(parse_layers("# x\na:\nb: a # y\n").unwrap().get("b"), Some(&BTreeSet::from(["a".to_string()])));
}

/// The package's crates, as they are.
#[test]
fn the_package_crates_are_layered() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for krate in ["src/rust/core", "src/rust/ggmlr"] {
        let (_, _, problems) = check(&root.join(krate)).unwrap();
        assert!(problems.is_empty(), "{krate}:\n{}", problems.join("\n"));
    }
}

#[test]
fn panics_outside_tests_need_an_invariant() {
    let src = "fn a(x: Option<u8>) -> u8 {\n    x.unwrap()\n}\n\
               fn b(v: &[u8]) -> u8 {\n    // INVARIANT: v is non-empty (checked by the caller).\n    *v.first().expect(\"one\")\n}\n\
               fn c() { let s = \".unwrap()\"; /* x.unwrap() */ }\n\
               fn d(x: Option<u8>) -> u8 { x.unwrap_or(0) }\n\
               #[cfg(test)]\nmod tests {\n    fn t() { None::<u8>.unwrap(); panic!(\"t\"); }\n}\n";
    let sites = panics::scan(Path::new("x.rs"), src);
    let got: Vec<(usize, &str, bool)> = sites.iter().map(|s| (s.line, s.call, s.justified)).collect();
    assert_eq!(got, vec![(2, "unwrap", false), (6, "expect", true)]);
    let far = "// INVARIANT: too far above\n\n\n\n\n\nfn e() { unreachable!() }\n";
    assert!(!panics::scan(Path::new("y.rs"), far)[0].justified);
}

/// Every `.unwrap()`, `.expect(..)` and panicking macro left in the
/// package's non-test code says why it cannot be reached.
#[test]
fn the_package_crates_have_no_unexplained_panics() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for krate in ["src/rust/core", "src/rust/ggmlr"] {
        let sites = panics::scan_crate(&root.join(krate)).unwrap();
        assert!(!sites.is_empty() || krate.ends_with("ggmlr"), "{krate}: the scan found no calls at all");
        let open: Vec<String> = sites.iter().filter(|s| !s.justified).map(|s| format!("{}:{}: {}", s.path.display(), s.line, s.call)).collect();
        assert!(
            open.is_empty(),
            "{krate}: return an error instead, or prove each unreachable in an `// INVARIANT:` comment:\n{}",
            open.join("\n")
        );
    }
}

#[test]
fn indexing_in_readers_needs_a_bounds_proof() {
    let src = "fn a(v: &[u8], i: usize) -> u8 {\n    v[i]\n}\n\
               fn b(v: &[u8]) -> u8 {\n    // BOUNDS: v.len() == 4 (checked by the caller).\n    v[3]\n}\n\
               #[derive(Debug)]\nstruct S([u8; 4]);\n\
               fn c(v: &[u8]) -> Vec<u8> { let [x, y] = [1u8, 2]; let _: &[u8] = &[x, y]; vec![v.len() as u8] }\n\
               fn d(m: &[Vec<u8>]) -> &[u8] { &m[0][1..] }\n\
               #[cfg(test)]\nmod tests {\n    fn t(v: &[u8]) -> u8 { v[9] }\n}\n";
    let sites = bounds::scan(Path::new("x.rs"), src);
    let got: Vec<(usize, bool)> = sites.iter().map(|s| (s.line, s.justified)).collect();
    assert_eq!(got, vec![(2, false), (6, true), (11, false), (11, false)]);
}

#[test]
fn a_function_proof_covers_its_own_body_only() {
    let src = "// BOUNDS-FN: v has 4 entries (checked by the caller).\n\
               fn a(v: &[u8]) -> u8 {\n    let f = |i: usize| { v[i] };\n    v[0] + f(3)\n}\n\
               fn b(v: &[u8]) -> u8 {\n    v[1]\n}\n\
               fn c(v: &[u8]) -> u8 { // BOUNDS-FN: v is non-empty.\n    v[0]\n}\n\
               /// Docs.\n/// BOUNDS-FN: a doc comment counts too.\nfn d(v: &[u8]) -> u8 {\n    v[0]\n}\n\
               // BOUNDS-FN: too far above\n\n\n\n\n\nfn e(v: &[u8]) -> u8 { v[0] }\n\
               // BOUNDS-FN: at the head of a long block\n// one\n// two\n// three\n// four\n#[inline]\nfn f(v: &[u8]) -> u8 { v[0] }\n";
    let sites = bounds::scan(Path::new("x.rs"), src);
    let got: Vec<(usize, bool)> = sites.iter().map(|s| (s.line, s.justified)).collect();
    assert_eq!(got, vec![(3, true), (4, true), (7, false), (10, true), (15, true), (23, false), (30, true)]);
}

/// A new index without a proof in a gated folder fails the gate: the scan
/// of a copy of the op rules with one added function reports it, and only it.
#[test]
fn the_gate_fails_on_an_unproved_index() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = std::env::temp_dir().join(format!("layercheck-gate-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let rules = std::fs::read_to_string(root.join("src/rust/core/src/op/rules.rs")).unwrap();
    let n = rules.lines().count();
    std::fs::write(dir.join("rules.rs"), format!("{rules}pub fn first(s: &[usize]) -> usize {{\n    s[0]\n}}\n")).unwrap();
    let sites = bounds::scan_paths(&[dir.as_path()]).unwrap();
    let open: Vec<usize> = sites.iter().filter(|s| !s.justified).map(|s| s.line).collect();
    assert_eq!(open, vec![n + 2]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A file that the folder's owning module declares under `#[cfg(test)]` is
/// test code: the gate leaves it out, and only it.
#[test]
fn test_modules_of_a_gated_folder_are_left_out() {
    let dir = std::env::temp_dir().join(format!("layercheck-testmods-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("d")).unwrap();
    std::fs::write(dir.join("d.rs"), "mod u;\n#[cfg(test)]\nmod t;\n").unwrap();
    std::fs::write(dir.join("d/t.rs"), "fn t(v: &[u8]) -> u8 { v[9] }\n").unwrap();
    std::fs::write(dir.join("d/u.rs"), "fn u(v: &[u8]) -> u8 { v[9] }\n").unwrap();
    let d = dir.join("d");
    let sites = bounds::scan_paths(&[d.as_path()]).unwrap();
    let names: Vec<String> = sites.iter().map(|s| s.path.file_name().unwrap().to_string_lossy().to_string()).collect();
    assert_eq!(names, ["u.rs"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every index expression left in the file readers and the gated folders
/// says why it is in bounds.
#[test]
fn the_readers_have_no_unexplained_indexing() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let paths: Vec<PathBuf> = bounds::gated().map(|p| root.join(p)).collect();
    assert!(paths.iter().all(|p| p.exists()), "a gated path is gone: {paths:?}");
    let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    let sites = bounds::scan_paths(&refs).unwrap();
    let open: Vec<String> = sites.iter().filter(|s| !s.justified && !bounds::pending(s)).map(|s| format!("{}:{}", s.path.display(), s.line)).collect();
    assert!(
        open.is_empty(),
        "use checked access (get, chunks_exact, first_chunk) and return an error, or prove each index in bounds \
         in a `// BOUNDS:` comment (or all of a function's in one `// BOUNDS-FN:` comment):\n{}",
        open.join("\n")
    );
}

#[test]
fn a_public_type_name_defined_twice_is_found() {
    let src = "pub struct Graph;\n// pub struct Node;\nconst S: &str = \"pub enum Value\";\n    pub enum Value<'a> { A(&'a u8) }\npub(crate) struct Hidden;\npub type Rows = u8;\npub trait Gemm {}\n";
    let names: Vec<String> = names::scan(src).into_iter().map(|(n, l)| format!("{n}:{l}")).collect();
    assert_eq!(names, ["Graph:1", "Value:4", "Rows:6", "Gemm:7"]);
    let dir = write_crate("names", "", &[("a.rs", "pub struct Pool;\n"), ("b/c.rs", "\npub enum Pool {}\n"), ("d.rs", "pub struct Other;\n")]);
    let dups = names::duplicates(&dir.join("src")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(dups.len(), 1, "{dups:?}");
    assert_eq!(dups["Pool"], ["a.rs:1", "b/c.rs:2"]);
}

/// No two public types of the engine crate share a name.
#[test]
fn the_core_crate_has_one_name_per_public_type() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dups = names::duplicates(&root.join("src/rust/core/src")).unwrap();
    let list: Vec<String> = dups.iter().map(|(n, places)| format!("{n}: {}", places.join(", "))).collect();
    assert!(list.is_empty(), "give each of these types a name of its own:\n{}", list.join("\n"));
}
