//! `layercheck [--tree] CRATE_DIR...`: checks each crate's module imports
//! against its `LAYERS` file (see the library's documentation); prints every
//! problem and exits 1 when there is one. `--tree` also prints each
//! top-level module with its size and what it may import.
//!
//! `layercheck --panics CRATE_DIR...`: counts `.unwrap()` / `.expect(` in
//! each crate's non-test code, lists those without an `INVARIANT:` comment
//! (see [`layercheck::panics`]) and exits 1 when there is one.
//!
//! `layercheck --bounds [FILE_OR_DIR...]`: lists the index expressions
//! without a `BOUNDS:` or `BOUNDS-FN:` proof (see [`layercheck::bounds`]) in
//! the paths named, by default the file readers, the gated folders and
//! the gated single files.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let tree = args.iter().any(|a| a == "--tree");
    let panics = args.iter().any(|a| a == "--panics");
    let bounds = args.iter().any(|a| a == "--bounds");
    let verbose = args.iter().any(|a| a == "--verbose");
    let dirs: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    if bounds {
        // No paths: the file readers and the gated folders of the workspace
        // (run from its root).
        let named: Vec<&str> = if dirs.is_empty() { layercheck::bounds::gated().collect() } else { dirs.iter().map(|d| d.as_str()).collect() };
        let paths: Vec<&std::path::Path> = named.iter().map(std::path::Path::new).collect();
        std::process::exit(i32::from(report_bounds(&paths, dirs.is_empty(), verbose)));
    }
    if dirs.is_empty() {
        eprintln!("usage: layercheck [--tree] CRATE_DIR...\n       layercheck --panics [--verbose] CRATE_DIR...\n       layercheck --bounds [--verbose] FILE_OR_DIR...");
        std::process::exit(2);
    }
    let mut bad = false;
    for d in dirs {
        if panics {
            bad |= report_panics(d, verbose);
            continue;
        }
        match layercheck::check(std::path::Path::new(d)) {
            Ok((krate, layers, problems)) => {
                println!("{d}: {} files, {} imports, {} problems", krate.files.len(), krate.edges.len(), problems.len());
                for p in &problems {
                    println!("  {p}");
                }
                if tree {
                    print!("{}", krate.tree(&layers));
                }
                bad |= !problems.is_empty();
            }
            Err(e) => {
                eprintln!("{d}: {e}");
                bad = true;
            }
        }
    }
    std::process::exit(i32::from(bad));
}

/// Print the crate's panicking calls; true when some lack a justification.
fn report_panics(d: &str, verbose: bool) -> bool {
    match layercheck::panics::scan_crate(std::path::Path::new(d)) {
        Ok(sites) => {
            let rows: Vec<Row> = sites.iter().map(|s| (s.justified, format!("{}:{}: {}", s.path.display(), s.line, s.call))).collect();
            report(&format!("{d}: {{n}} unwrap/expect calls in non-test code, {{ok}} with an {} comment, {{open}} without", layercheck::panics::MARKER), &rows, verbose)
        }
        Err(e) => {
            eprintln!("{d}: {e}");
            true
        }
    }
}

/// Print the index expressions of `paths` (the gate's: without the pending
/// files, counted apart); true when some lack a justification.
fn report_bounds(paths: &[&std::path::Path], gate: bool, verbose: bool) -> bool {
    match layercheck::bounds::scan_paths(paths) {
        Ok(mut sites) => {
            if gate {
                let left = sites.iter().filter(|s| layercheck::bounds::pending(s)).count();
                sites.retain(|s| !layercheck::bounds::pending(s));
                println!("{} files pending, not gated: {left} index expressions", layercheck::bounds::PENDING.len());
            }
            let rows: Vec<Row> = sites.iter().map(|s| (s.justified, format!("{}:{}", s.path.display(), s.line))).collect();
            let head = format!("{} files: {{n}} index expressions in non-test code, {{ok}} with a {} comment, {{open}} without", paths.len(), layercheck::bounds::MARKER);
            report(&head, &rows, verbose)
        }
        Err(e) => {
            eprintln!("{e}");
            true
        }
    }
}

/// One found site: whether it carries its justification, and where it is.
type Row = (bool, String);

/// Print the summary `head` (its `{n}`, `{ok}` and `{open}` filled in) and
/// the unjustified rows (all rows with `verbose`); true when one is unjustified.
fn report(head: &str, rows: &[Row], verbose: bool) -> bool {
    let open = rows.iter().filter(|r| !r.0).count();
    let n = rows.len();
    println!("{}", head.replace("{n}", &n.to_string()).replace("{ok}", &(n - open).to_string()).replace("{open}", &open.to_string()));
    for (justified, at) in rows.iter().filter(|r| verbose || !r.0) {
        let mark = if *justified { "ok " } else { "   " };
        println!("  {mark}{at}");
    }
    open > 0
}
