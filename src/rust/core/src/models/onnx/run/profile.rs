//! Per-node timing of ONNX models on the CPU, for finding where inference
//! time goes. Not a pass/fail test:
//! `GGMLR_ONNX_PROFILE=DIR cargo test --release -p ggmlr-core onnx_profile -- --ignored --nocapture`
//! times every `DIR/<name>.onnx` with its input `DIR/<name>/input_0.pb`
//! (`GGMLR_PROFILE_THREADS`, default 1; `GGMLR_PROFILE_REPS`, default 20).

use crate::backend::Backend;
use std::collections::BTreeMap;
use std::sync::Arc;

fn env_usize(key: &str, default: usize) -> usize {
    std::env::var(key).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[test]
#[ignore]
fn onnx_profile() {
    let Ok(dir) = std::env::var("GGMLR_ONNX_PROFILE") else { return };
    let threads = env_usize("GGMLR_PROFILE_THREADS", 1);
    let reps = env_usize("GGMLR_PROFILE_REPS", 20);
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "onnx")).collect();
    files.sort();
    for path in files {
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        let (_, x) = crate::models::onnx::read_tensor_file(&path.with_extension("").join("input_0.pb")).unwrap();
        let b = Backend::cpu();
        b.set_n_threads(threads).unwrap();
        let mut r = crate::models::onnx::load(&path, Arc::new(b), false, vec![]).unwrap();
        let input = r.model.graph.inputs[0].name.clone();
        let given = vec![(input, x.f64s().to_vec(), Some(x.shape.clone()))];
        r.run(given.clone()).unwrap();
        let whole = (0..reps)
            .map(|_| {
                let t = std::time::Instant::now();
                r.run(given.clone()).unwrap();
                t.elapsed().as_secs_f64()
            })
            .fold(f64::INFINITY, f64::min);
        let p = &r.plans[0];
        let nodes = p.graph.plan().unwrap();
        let mut best = vec![f64::INFINITY; nodes.len()];
        for _ in 0..reps {
            for (i, n) in nodes.iter().enumerate() {
                let t = std::time::Instant::now();
                p.b.backend.compute(std::slice::from_ref(n)).unwrap();
                best[i] = best[i].min(t.elapsed().as_secs_f64());
            }
        }
        let sum: f64 = best.iter().sum();
        println!("\n{name}: {threads} thread(s), {} nodes, whole run {:.3} ms, sum of nodes {:.3} ms", nodes.len(), whole * 1e3, sum * 1e3);
        let mut by_op: BTreeMap<String, (f64, usize)> = BTreeMap::new();
        for (n, t) in nodes.iter().zip(&best) {
            let e = by_op.entry(n.op.name().to_string()).or_insert((0.0, 0));
            e.0 += t;
            e.1 += 1;
        }
        let mut v: Vec<_> = by_op.into_iter().collect();
        v.sort_by(|a, b| b.1 .0.total_cmp(&a.1 .0));
        for (op, (t, k)) in v {
            println!("  {op:<20} {k:4} nodes {:8.3} ms {:5.1}%", t * 1e3, 100.0 * t / sum);
        }
        let mut idx: Vec<usize> = (0..nodes.len()).collect();
        idx.sort_by(|&a, &b| best[b].total_cmp(&best[a]));
        for &i in idx.iter().take(12) {
            let n = &nodes[i];
            let srcs: Vec<String> = n.srcs.iter().map(|s| format!("{:?}{}", s.layout.ne, if s.layout.is_contiguous() { "" } else { "(strided)" })).collect();
            println!("  #{i:<4} {:<14} {:8.3} ms  {:?} <- {}", n.op.name(), best[i] * 1e3, n.dst.layout.ne, srcs.join(", "));
        }
    }
}
