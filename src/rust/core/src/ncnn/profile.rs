//! Per-layer timing of the three fixture architectures at a realistic input
//! size, for finding where inference time goes. Not a pass/fail test:
//! `GGMLR_PROFILE_THREADS=1 cargo test --release -p ggmlr-core ncnn_profile -- --ignored --nocapture`
//! (`GGMLR_PROFILE_SIZE` sets the input width and height, default 224).

use super::{DataReader, Mat, Net};
use std::collections::BTreeMap;

fn fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../tests/testthat/fixtures/ncnn")
        .join(name)
}

fn env_usize(key: &str, default: usize) -> usize {
    std::env::var(key).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Best-of-`reps` forward time of every layer, and of the whole pass (ms).
fn profile(arch: &str, threads: usize, size: usize, reps: usize) -> (Vec<(String, String, f64)>, f64) {
    let mut net = Net::new(threads, true).unwrap();
    let text = std::fs::read_to_string(fixture(&format!("{arch}.param"))).unwrap();
    net.load_param_text(&text).unwrap();
    let bytes = std::fs::read(fixture(&format!("{arch}.bin"))).unwrap();
    net.load_model(&DataReader::Bytes(bytes)).unwrap();
    let data: Vec<f32> = (0..size * size * 3)
        .map(|i| ((i * 7919 % 2003) as f32 / 1001.5) - 1.0)
        .collect();
    let input = net.find_blob("data").unwrap();
    let output = net.find_blob("prob").unwrap();
    let mut best: BTreeMap<usize, f64> = BTreeMap::new();
    let mut total = f64::INFINITY;
    for _ in 0..reps {
        let mut ex = net.create_extractor().unwrap();
        ex.set_profiling(true);
        ex.input(&net, input, Mat::from_shape(&[size, size, 3], data.clone()).unwrap())
            .unwrap();
        let t0 = std::time::Instant::now();
        ex.extract(&net, output).unwrap();
        total = total.min(t0.elapsed().as_secs_f64());
        for &(li, t) in ex.timings() {
            let e = best.entry(li).or_insert(f64::INFINITY);
            *e = e.min(t);
        }
    }
    let info = net.layer_info();
    let rows = best
        .iter()
        .map(|(&li, &t)| (info[li].name.clone(), info[li].type_name.clone(), t * 1e3))
        .collect();
    (rows, total * 1e3)
}

#[test]
#[ignore]
fn ncnn_profile() {
    let threads = env_usize("GGMLR_PROFILE_THREADS", 1);
    let size = env_usize("GGMLR_PROFILE_SIZE", 224);
    let reps = env_usize("GGMLR_PROFILE_REPS", 30);
    for arch in ["arch_squeezenet", "arch_mobilenet", "arch_resnet"] {
        let (rows, total) = profile(arch, threads, size, reps);
        println!("\n{arch}: {threads} thread(s), {size}x{size}, best of {reps}");
        let sum: f64 = rows.iter().map(|r| r.2).sum();
        for (name, ty, ms) in rows {
            println!("  {name:<14} {ty:<22} {ms:8.3} ms {:5.1}%", 100.0 * ms / sum);
        }
        println!("  sum of layers {sum:.3} ms; whole pass {total:.3} ms");
    }
}
