//! Per-layer timing of the three fixture architectures at a realistic input
//! size, for finding where inference time goes. Not a pass/fail test:
//! `GGMLR_PROFILE_THREADS=1 cargo test --release -p ggmlr-core ncnn_profile -- --ignored --nocapture`
//! (`GGMLR_PROFILE_SIZE` sets the input width and height, default 224;
//! `GGMLR_PROFILE_ARCHS=squeezenet,resnet` limits the nets; `GGMLR_PROFILE_REPS`;
//! `GGMLR_PROFILE_CLOCK=wall` times one thread on the wall clock too;
//! `GGMLR_PROFILE_LAYERS=0` times only whole passes, without the clock
//! reads around every layer).

use super::{DataReader, Mat, Net};
use std::collections::BTreeMap;

fn fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../tests/testthat/fixtures/ncnn")
        .join(name)
}

/// Seconds since an arbitrary start on a monotonic wall clock.
fn wall() -> f64 {
    use std::sync::OnceLock;
    static START: OnceLock<std::time::Instant> = OnceLock::new();
    START.get_or_init(std::time::Instant::now).elapsed().as_secs_f64()
}

/// CPU seconds of the calling thread: unlike wall time, not inflated when
/// other processes take the core (with one thread the layers run on the
/// calling thread).
#[cfg(target_os = "linux")]
fn thread_cpu() -> f64 {
    #[repr(C)]
    struct Timespec {
        sec: i64,
        nsec: i64,
    }
    extern "C" {
        fn clock_gettime(clock: i32, t: *mut Timespec) -> i32;
    }
    const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
    let mut t = Timespec { sec: 0, nsec: 0 };
    // SAFETY: clock_gettime writes one timespec (two 64-bit fields on 64-bit Linux).
    unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.sec as f64 + t.nsec as f64 * 1e-9
}

#[cfg(not(target_os = "linux"))]
fn thread_cpu() -> f64 {
    wall()
}

fn env_usize(key: &str, default: usize) -> usize {
    std::env::var(key).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Best-of-`reps` forward time of every layer, and of the whole pass (ms).
fn profile(arch: &str, threads: usize, size: usize, reps: usize) -> (Vec<(String, String, f64, f64)>, f64, f64) {
    let mut net = Net::new(threads, true).unwrap();
    let text = std::fs::read_to_string(fixture(&format!("{arch}.param"))).unwrap();
    net.load_param_text(&text).unwrap();
    let bytes = std::fs::read(fixture(&format!("{arch}.bin"))).unwrap();
    net.load_model(&DataReader::from_bytes(bytes)).unwrap();
    let data: Vec<f32> = (0..size * size * 3)
        .map(|i| ((i * 7919 % 2003) as f32 / 1001.5) - 1.0)
        .collect();
    let input = net.find_blob("data").unwrap();
    let output = net.find_blob("prob").unwrap();
    // Per layer: fastest time and summed time.
    let mut best: BTreeMap<usize, (f64, f64)> = BTreeMap::new();
    let cpu = threads == 1 && std::env::var("GGMLR_PROFILE_CLOCK").as_deref() != Ok("wall");
    let clock: fn() -> f64 = if cpu { thread_cpu } else { wall };
    let (mut total, mut sum_all) = (f64::INFINITY, 0.0);
    let layers = std::env::var("GGMLR_PROFILE_LAYERS").as_deref() != Ok("0");
    for _ in 0..reps {
        let mut ex = crate::ncnn::Extractor::new(&net).unwrap();
        if layers {
            ex.set_profiling(Some(clock));
        }
        ex.input(&net, input, Mat::from_shape(&[size, size, 3], data.clone()).unwrap())
            .unwrap();
        let t0 = clock();
        ex.extract(&net, output).unwrap();
        let dt = clock() - t0;
        total = total.min(dt);
        sum_all += dt;
        for &(li, t) in ex.timings() {
            let e = best.entry(li).or_insert((f64::INFINITY, 0.0));
            *e = (e.0.min(t), e.1 + t);
        }
    }
    let info = net.layer_info();
    let rows = best
        .iter()
        .map(|(&li, &(t, sum))| (info[li].name.clone(), info[li].type_name.clone(), t * 1e3, sum / reps.max(1) as f64 * 1e3))
        .collect();
    (rows, total * 1e3, sum_all / reps.max(1) as f64 * 1e3)
}

#[test]
#[ignore]
fn ncnn_profile() {
    let threads = env_usize("GGMLR_PROFILE_THREADS", 1);
    let size = env_usize("GGMLR_PROFILE_SIZE", 224);
    let reps = env_usize("GGMLR_PROFILE_REPS", 30);
    let only = std::env::var("GGMLR_PROFILE_ARCHS").unwrap_or_default();
    for arch in ["arch_squeezenet", "arch_mobilenet", "arch_resnet"] {
        if !only.is_empty() && !only.split(',').any(|a| arch.ends_with(a)) {
            continue;
        }
        let (rows, total, mean) = profile(arch, threads, size, reps);
        let cpu = threads == 1 && std::env::var("GGMLR_PROFILE_CLOCK").as_deref() != Ok("wall");
        let kind = if cpu { "thread CPU time" } else { "wall time" };
        println!("\n{arch}: {threads} thread(s), {size}x{size}, best of {reps} ({kind})");
        let sum: f64 = rows.iter().map(|r| r.2).sum();
        for (name, ty, ms, mean) in rows {
            println!("  {name:<14} {ty:<22} {ms:8.3} ms {:5.1}%  (mean {mean:.3} ms)", 100.0 * ms / sum);
        }
        if sum > 0.0 {
            println!("  sum of layers {sum:.3} ms; whole pass {total:.3} ms (mean {mean:.3} ms)");
        } else {
            println!("  whole pass {total:.3} ms (mean {mean:.3} ms)");
        }
    }
}

/// Per benchmark net (`GGMLR_NCNN_BENCH_DIR`, `GGMLR_NCNN_BENCH_NETS`),
/// best-of-`GGMLR_PROFILE_REPS` time of a whole pass on one thread (thread
/// CPU time) and the share of each layer type (`GGMLR_PROFILE_AVX512=0`:
/// without the AVX-512 product tiles):
/// `GGMLR_NCNN_BENCH_DIR=dir cargo test --release -p ggmlr-core ncnn_bench_profile -- --ignored --nocapture`
#[test]
#[ignore]
fn ncnn_bench_profile() {
    let Ok(d) = std::env::var("GGMLR_NCNN_BENCH_DIR") else { return };
    let d = std::path::Path::new(&d);
    let reps = env_usize("GGMLR_PROFILE_REPS", 5);
    // GGMLR_PROFILE_AVX512=0: the product tiles on AVX2 only.
    crate::ncnn::layers::kernels::gemm::set_avx512(std::env::var("GGMLR_PROFILE_AVX512").as_deref() != Ok("0"));
    let only = std::env::var("GGMLR_NCNN_BENCH_NETS").unwrap_or_default();
    let table = std::fs::read_to_string(d.join("bench.tsv")).unwrap();
    for line in table.lines().skip(1) {
        let f: Vec<&str> = line.split('\t').collect();
        if !only.is_empty() && !only.split(',').any(|o| o == f[0]) {
            continue;
        }
        let blob = |s: &str| {
            let b = s.split(';').next().unwrap();
            let (n, dims) = b.rsplit_once(':').unwrap();
            (n.to_string(), dims.split(',').map(|v| v.parse::<usize>().unwrap()).collect::<Vec<_>>())
        };
        let ((inp, shape), (out, _)) = (blob(f[1]), blob(f[2]));
        let mut net = Net::new(1, true).unwrap();
        net.load_param_text(&std::fs::read_to_string(d.join(format!("{}.param", f[0]))).unwrap()).unwrap();
        net.load_model(&DataReader::from_bytes(std::fs::read(d.join(format!("{}.bin", f[0]))).unwrap())).unwrap();
        let n: usize = shape.iter().product();
        let data: Vec<f32> = (0..n).map(|i| ((i * 7919 % 2003) as f32 / 1001.5) - 1.0).collect();
        let (ib, ob) = (net.find_blob(&inp).unwrap(), net.find_blob(&out).unwrap());
        let mut best = f64::INFINITY;
        let mut by_type: BTreeMap<String, f64> = BTreeMap::new();
        let info = net.layer_info();
        for r in 0..reps + 1 {
            let mut ex = crate::ncnn::Extractor::new(&net).unwrap();
            ex.set_profiling(Some(thread_cpu));
            ex.input(&net, ib, Mat::from_shape(&shape, data.clone()).unwrap()).unwrap();
            let t0 = thread_cpu();
            ex.extract(&net, ob).unwrap();
            let dt = thread_cpu() - t0;
            if r > 0 && dt < best {
                best = dt;
                by_type.clear();
                for &(li, t) in ex.timings() {
                    *by_type.entry(info[li].type_name.clone()).or_default() += t;
                }
            }
        }
        let mut parts: Vec<(String, f64)> = by_type.into_iter().collect();
        parts.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap());
        let top: Vec<String> = parts.iter().take(4).map(|(t, v)| format!("{t} {:.0}%", 100.0 * v / best)).collect();
        println!("{:<20} {:9.2} ms  {}", f[0], best * 1e3, top.join(", "));
    }
}

/// Single-layer nets (`GGMLR_NCNN_LAYER_DIR`, with a `layers.tsv` of tag,
/// type, input extents, params, and the real ncnn's time in ms): our
/// best-of-7 thread CPU time next to it.
#[test]
#[ignore]
fn ncnn_layer_profile() {
    let Ok(d) = std::env::var("GGMLR_NCNN_LAYER_DIR") else { return };
    let d = std::path::Path::new(&d);
    let (mut ours_sum, mut theirs_sum) = (0.0, 0.0);
    for line in std::fs::read_to_string(d.join("layers.tsv")).unwrap().lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let shape: Vec<usize> = f[2].split(',').map(|v| v.parse().unwrap()).collect();
        let mut net = Net::new(1, true).unwrap();
        net.load_param_text(&std::fs::read_to_string(d.join(format!("{}.param", f[0]))).unwrap()).unwrap();
        net.load_model(&DataReader::from_bytes(std::fs::read(d.join(format!("{}.bin", f[0]))).unwrap())).unwrap();
        let b = std::fs::read(d.join(format!("{}.in", f[0]))).unwrap();
        let v: Vec<f32> = b[8..].chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        let (ib, ob) = (net.find_blob("data").unwrap(), net.find_blob("out").unwrap());
        let mut best = f64::INFINITY;
        for r in 0..8 {
            let mut ex = crate::ncnn::Extractor::new(&net).unwrap();
            ex.input(&net, ib, Mat::from_shape(&shape, v.clone()).unwrap()).unwrap();
            let t0 = thread_cpu();
            ex.extract(&net, ob).unwrap();
            let dt = thread_cpu() - t0;
            if r > 0 {
                best = best.min(dt);
            }
        }
        let theirs: f64 = f[4].parse().unwrap();
        ours_sum += best * 1e3;
        theirs_sum += theirs;
        println!("{} {:<22} {:<14} {:8.3} {:8.3} {:5.2}  {}", f[0], f[1], f[2], best * 1e3, theirs, best * 1e3 / theirs, f[3]);
    }
    println!("sum {ours_sum:.3} ms vs {theirs_sum:.3} ms: {:.2}", ours_sum / theirs_sum);
}

/// Thread CPU time of one layer's forward, run directly (no extractor):
/// `GGMLR_NCNN_LAYER_DIR=dir GGMLR_NCNN_LAYER=015 ... ncnn_one_layer -- --ignored`.
#[test]
#[ignore]
fn ncnn_one_layer() {
    let (Ok(d), Ok(tag)) = (std::env::var("GGMLR_NCNN_LAYER_DIR"), std::env::var("GGMLR_NCNN_LAYER")) else { return };
    let d = std::path::Path::new(&d);
    let line = std::fs::read_to_string(d.join("layers.tsv")).unwrap().lines().find(|l| l.starts_with(&tag)).unwrap().to_string();
    let f: Vec<&str> = line.split('\t').collect();
    let shape: Vec<usize> = f[2].split(',').map(|v| v.parse().unwrap()).collect();
    let mut net = Net::new(1, true).unwrap();
    net.load_param_text(&std::fs::read_to_string(d.join(format!("{tag}.param"))).unwrap()).unwrap();
    net.load_model(&DataReader::from_bytes(std::fs::read(d.join(format!("{tag}.bin"))).unwrap())).unwrap();
    let b = std::fs::read(d.join(format!("{tag}.in"))).unwrap();
    let v: Vec<f32> = b[8..].chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    let x = Mat::from_shape(&shape, v).unwrap();
    let layer = net.builtin_layer(1).unwrap();
    let opt = crate::ncnn::Opt::default();
    for _ in 0..3 {
        let t0 = thread_cpu();
        let n = 20;
        for _ in 0..n {
            crate::ncnn::par::run_sequential(|| layer.forward(vec![x.clone()], 1, &opt).unwrap());
        }
        println!("{tag}: {:.3} ms per forward", (thread_cpu() - t0) / n as f64 * 1e3);
    }
}
