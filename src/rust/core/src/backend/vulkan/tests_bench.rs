//! Micro-benchmarks of the device side, run on request:
//! `cargo test --release -p ggmlr-core vulkan::tests_bench -- --ignored --nocapture`
//! (GGMLR_BENCH_N=4096 adds the 4096 matmul). They print figures and assert nothing
//! about speed.

use super::test_util::*;
use super::*;
use crate::base::dtype::DType::{self, *};
use crate::op::{Op, UnaryOp};
use std::time::Instant;

fn secs<F: FnMut()>(reps: usize, mut f: F) -> f64 {
    f();
    let t = Instant::now();
    for _ in 0..reps {
        f();
    }
    t.elapsed().as_secs_f64() / reps as f64
}

#[test]
#[ignore]
fn bench_transfers_matmul_submission() {
    let Some(c) = ctx() else { return };
    println!("device: {} ({})", c.info().name, c.info().driver);
    let bytes = 64 << 20;
    let b = c.alloc(bytes).unwrap();
    let data = vec![1u8; bytes];
    let mut out = vec![0u8; bytes];
    let up = secs(5, || c.write(&b, 0, &data).unwrap());
    let down = secs(5, || c.read(&b, 0, &mut out).unwrap());
    println!("upload   {:8.2} GB/s (64 MiB)", bytes as f64 / up / 1e9);
    println!("download {:8.2} GB/s (64 MiB)", bytes as f64 / down / 1e9);
    let mut sizes = if std::env::var("GGMLR_BENCH_SKIP_MM").is_ok() { vec![] } else { vec![256, 1024] };
    if let Ok(n) = std::env::var("GGMLR_BENCH_N") {
        sizes.push(n.parse().unwrap());
    }
    for n in sizes {
        for dt in [F32, F16] {
            let x = values(n * n, 1, -1.0, 1.0);
            let a = upload(&c, &x, [n, n, 1, 1], dt, false, 0);
            let bb = upload(&c, &x, [n, n, 1, 1], dt, false, 0);
            let d = output(&c, [n, n, 1, 1], F32);
            let node = || vec![VkNode { op: &Op::MulMat, srcs: vec![a.r(), bb.r()], dst: d.r() }];
            let t = secs(if n >= 1024 { 1 } else { 3 }, || c.run_graph(&node()).unwrap());
            println!("matmul {n:5} {:4} {:8.2} GFLOP/s", dt_name(dt), 2.0 * (n as f64).powi(3) / t / 1e9);
        }
    }
    let n = 1 << 22;
    let big = upload(&c, &vec![1.0; n], [n, 1, 1, 1], F32, false, 0);
    let bo = output(&c, [n, 1, 1, 1], F32);
    let t = secs(3, || c.run_graph(&[VkNode { op: &Op::Add, srcs: vec![big.r(), big.r()], dst: bo.r() }]).unwrap());
    println!("add f32 {:8.1} M elements/s", n as f64 / t / 1e6);
    let x = upload(&c, &[1.0; 16], [16, 1, 1, 1], F32, false, 0);
    let y = output(&c, [16, 1, 1, 1], F32);
    let relu = Op::Unary(UnaryOp::Relu);
    let t = secs(200, || c.run_graph(&[VkNode { op: &relu, srcs: vec![x.r()], dst: y.r() }]).unwrap());
    println!("graph submission overhead {:8.1} us (one tiny node)", t * 1e6);
}

fn dt_name(d: DType) -> &'static str {
    d.name()
}

/// Time to create each pipeline variant (run with MESA_SHADER_CACHE_DISABLE=true
/// to see a driver's compile times).
#[test]
#[ignore]
fn bench_pipeline_creation() {
    if ctx().is_none() {
        return;
    }
    let c = VkContext::unshared(0).unwrap();
    let filter = std::env::var("GGMLR_BENCH_SHADER").unwrap_or_default();
    for shader in [Shader::Matmul, Shader::Reduce, Shader::Eltwise] {
        for op in [0u32, 1, 2, 5] {
            for all_f32 in [true, false] {
                let v = Variant { shader, op, sub: 0, all_f32 };
                if !format!("{shader:?}").to_lowercase().contains(&filter) {
                    continue;
                }
                let t = Instant::now();
                match c.pipelines.get(&c.device, v) {
                    Ok(_) => println!("{v:?}: {:.2} s", t.elapsed().as_secs_f64()),
                    Err(e) => println!("{v:?}: {e}"),
                }
            }
        }
    }
}
