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
