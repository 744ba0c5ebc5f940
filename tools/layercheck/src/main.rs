//! `layercheck [--tree] CRATE_DIR...`: checks each crate's module imports
//! against its `LAYERS` file (see the library's documentation); prints every
//! problem and exits 1 when there is one. `--tree` also prints each
//! top-level module with its size and what it may import.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let tree = args.iter().any(|a| a == "--tree");
    let dirs: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    if dirs.is_empty() {
        eprintln!("usage: layercheck [--tree] CRATE_DIR...");
        std::process::exit(2);
    }
    let mut bad = false;
    for d in dirs {
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
